package protocol

// Event kinds Buzz uses. Names follow upstream Buzz; numbers are the wire contract.
const (
	KindProfile          = 0
	KindTextNote         = 1
	KindDeletion         = 5
	KindReaction         = 7
	KindStreamMessage    = 9
	KindPutUser          = 9000
	KindRemoveUser       = 9001
	KindEditMetadata     = 9002
	KindDeleteEvent      = 9005
	KindCreateGroup      = 9007
	KindDeleteGroup      = 9008
	KindJoinRequest      = 9021
	KindLeaveRequest     = 9022
	KindAgentProfile     = 10100
	KindPresence         = 20001
	KindTyping           = 20002
	KindAuth             = 22242
	KindObserverFrame    = 24200
	KindHTTPAuth         = 27235
	KindEngram           = 30174
	KindPrivateReminder  = 30300 // NIP-ER: author-only, due at its not_before
	KindGroupMetadata    = 39000
	KindGroupAdmins      = 39001
	KindGroupMembers     = 39002
	KindStreamMessageV2  = 40002
	KindEdit             = 40003
	KindReminder         = 40007
	KindDiffMessage      = 40008
	KindSystemMessage    = 40099
	KindCanvas           = 40100
	KindMemberAdded      = 44100
	KindMemberRemoved    = 44101
	KindTurnMetric       = 44200
	KindForumPost        = 45001
	KindForumVote        = 45002
	KindForumComment     = 45003
	KindWorkflowApproval = 46010
)

// Kinds the relay only classifies and does not otherwise read: clients may publish the first
// group, never the second (relay-only upstream); gift wraps are p-gated.
const (
	KindLongForm   = 30023 // NIP-23 article
	KindReadState  = 30078 // NIP-78 app data: upstream's read state
	KindUserStatus = 30315 // NIP-38

	KindRelayMembership = 13534 // NIP-43 membership list
	KindDMVisibility    = 30622 // NIP-DV hidden-DM snapshot
	KindGroupRoles      = 39003 // NIP-29 roles
	KindThreadSummary   = 39005
	KindWindowBounds    = 39006
	KindRelayReserved   = 40901 // relay-only upstream; not served here
	KindPresenceQuery   = 40902 // asks the relay for named pubkeys' presence

	KindGiftWrap = 1059 // NIP-59
)

// IsEphemeral reports whether events of kind k are fanned out but never stored (NIP-01).
func IsEphemeral(k int) bool { return k >= 20000 && k < 30000 }

// IsReplaceable reports NIP-01 replaceable kinds (one per author and kind).
func IsReplaceable(k int) bool { return k == 0 || k == 3 || k == 41 || (k >= 10000 && k < 20000) }

// IsAddressable reports NIP-01 parameterized replaceable kinds (one per author, kind and d tag).
func IsAddressable(k int) bool { return k >= 30000 && k < 40000 }

// IsChannelAdmin reports the NIP-29 admin kinds that change a channel's state.
func IsChannelAdmin(k int) bool {
	switch k {
	case KindPutUser, KindRemoveUser, KindEditMetadata, KindDeleteEvent, KindCreateGroup,
		KindDeleteGroup, KindJoinRequest, KindLeaveRequest:
		return true
	}
	return false
}

// MessageKinds are the kinds that carry channel chat content (context and history queries).
var MessageKinds = []int{KindStreamMessage, KindStreamMessageV2}
