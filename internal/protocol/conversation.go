package protocol

// Conversation names one conversation in Buzz: a thread of a channel (Root is the thread's root
// event id) or the whole channel (Root empty: channel-wide sessions and DMs). Harnesses key a
// conversation's queue, turn and ACP session by it. The zero value is no conversation.
type Conversation struct {
	Channel string
	Root    string
}

// ChannelConversation is the conversation spanning a whole channel.
func ChannelConversation(channelID string) Conversation { return Conversation{Channel: channelID} }

// IsThread reports whether the conversation is one thread rather than the whole channel.
func (c Conversation) IsThread() bool { return c.Root != "" }

// ID is the conversation's wire id, as session/new carries it in _meta.buzz.conversationId:
// "buzz:<channel>:<root>" for a thread, "buzz:<channel>:channel:<channel>" for a conversation
// spanning the whole channel (the form upstream uses for one conversation per channel).
func (c Conversation) ID() string {
	if c.Root == "" {
		return "buzz:" + c.Channel + ":channel:" + c.Channel
	}
	return "buzz:" + c.Channel + ":" + c.Root
}

// String is the conversation's short form for logs: the channel id, or "<channel>:<root>".
func (c Conversation) String() string {
	if c.Root == "" {
		return c.Channel
	}
	return c.Channel + ":" + c.Root
}
