package protocol

// Direct-message command kinds (upstream buzz-core). A DM is a private channel of type "dm"
// whose members are its participants; the relay creates it when it receives a 41010.
const (
	KindDMOpen      = 41010 // ["p", participant]… (1–8, the signer is added); reply names channel_id
	KindDMAddMember = 41011 // ["h", dm], ["p", new participant]…: opens the DM of the merged set
	KindDMHide      = 41012 // ["h", dm]: hide from the signer's list (the relay republishes their 30622)
)

// MaxDMParticipants is the size cap of a DM, the signer included.
const MaxDMParticipants = 9
