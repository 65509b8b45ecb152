package cli

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/buzz-harness/buzz/internal/client"
	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/protocol/ownerauth"
	"github.com/nbd-wtf/go-nostr"
	"github.com/spf13/cobra"
)

// profile is users get's output: the kind 0 fields plus who and when.
type profile struct {
	Pubkey      string `json:"pubkey"`
	Npub        string `json:"npub"`
	DisplayName string `json:"display_name"`
	Name        string `json:"name"`
	About       string `json:"about"`
	Picture     string `json:"picture"`
	Nip05       string `json:"nip05"`
	CreatedAt   int64  `json:"created_at"`
	EventID     string `json:"event_id"`
}

func (a *app) usersCommand() *cobra.Command {
	var pkFlag string
	get := a.leaf("get", "Show a user's profile (kind 0); null if none", func(ctx context.Context, cmd *cobra.Command) (any, error) {
		b, err := a.bridge()
		if err != nil {
			return nil, err
		}
		pk := b.PublicKey()
		if pkFlag != "" {
			if pk, err = protocol.ParsePubkey(pkFlag); err != nil {
				return nil, usageError("--pubkey: %s", err)
			}
		}
		ev, err := latestProfile(ctx, b, pk)
		if err != nil || ev == nil {
			return nil, err
		}
		var c map[string]any
		_ = json.Unmarshal([]byte(ev.Content), &c)
		s := func(k string) string { v, _ := c[k].(string); return v }
		return profile{
			Pubkey: pk, Npub: protocol.Npub(pk), DisplayName: s("display_name"), Name: s("name"),
			About: s("about"), Picture: s("picture"), Nip05: s("nip05"),
			CreatedAt: int64(ev.CreatedAt), EventID: ev.ID,
		}, nil
	})
	get.Flags().StringVar(&pkFlag, "pubkey", "", "user pubkey, hex or npub (default: yourself)")

	var name, displayName, about, picture, nip05 string
	set := a.leaf("set-profile", "Set your profile (kind 0), keeping fields you do not pass", func(ctx context.Context, cmd *cobra.Command) (any, error) {
		fl := cmd.Flags()
		if !fl.Changed("name") && !fl.Changed("display-name") && !fl.Changed("about") && !fl.Changed("picture") && !fl.Changed("nip05") {
			return nil, usageError("nothing to set: pass --name, --display-name, --about, --picture or --nip05")
		}
		b, err := a.bridge()
		if err != nil {
			return nil, err
		}
		// kind 0 is replaceable: start from the current profile so unset fields survive.
		c := map[string]any{}
		cur, err := latestProfile(ctx, b, b.PublicKey())
		if err != nil {
			return nil, err
		}
		if cur != nil {
			_ = json.Unmarshal([]byte(cur.Content), &c)
			if c == nil {
				c = map[string]any{}
			}
		}
		if fl.Changed("name") {
			c["name"] = name
			if !fl.Changed("display-name") {
				c["display_name"] = name // mentions resolve display_name first
			}
		}
		for flag, key := range map[string]string{"display-name": "display_name", "about": "about", "picture": "picture", "nip05": "nip05"} {
			if fl.Changed(flag) {
				v, _ := fl.GetString(flag)
				c[key] = v
			}
		}
		content, err := json.Marshal(c)
		if err != nil {
			return nil, err
		}
		ev := &nostr.Event{Kind: protocol.KindProfile, Content: string(content), Tags: nostr.Tags{}}
		// The profile's auth tag is the attestation sibling agents and Desktop's "managed by"
		// read: without --auth-tag the current one is kept (with it, the bridge puts that on).
		if cur != nil && b.AuthTag == "" {
			if t := cur.Tags.Find(ownerauth.TagName); t != nil {
				ev.Tags = append(ev.Tags, t)
			}
		}
		// Replaceable-event ties go to the lower id; make sure an update within the same second
		// as the previous profile still wins by moving created_at past it.
		now := nostr.Now()
		if cur != nil && now <= cur.CreatedAt {
			now = cur.CreatedAt + 1
		}
		ev.CreatedAt = now
		return publish(ctx, b, ev)
	})
	set.Aliases = []string{"set"}
	set.Flags().StringVar(&name, "name", "", "name (also used as display_name unless --display-name is given)")
	set.Flags().StringVar(&displayName, "display-name", "", "display name")
	set.Flags().StringVar(&about, "about", "", "about text")
	set.Flags().StringVar(&picture, "picture", "", "picture URL")
	set.Flags().StringVar(&nip05, "nip05", "", "NIP-05 identifier")
	var presencePks string
	presence := a.leaf("presence", "Who of these is online or away (absent = offline)", func(ctx context.Context, cmd *cobra.Command) (any, error) {
		return a.presence(ctx, presencePks)
	})
	requiredString(presence, &presencePks, "pubkeys", "comma-separated pubkeys, hex or npub")
	var status string
	setPresence := &cobra.Command{
		Use:   "set-presence [online|away|offline]",
		Short: "Set your presence (kind 20001, over a WebSocket: the HTTP bridge takes no ephemeral kinds)",
		Args:  cobra.MaximumNArgs(1),
	}
	setPresence.RunE = func(cmd *cobra.Command, args []string) error {
		return a.run(func(ctx context.Context, cmd *cobra.Command) (any, error) {
			if len(args) == 1 {
				if cmd.Flags().Changed("status") && args[0] != status {
					return nil, usageError("the status is given twice (%q and --status %q)", args[0], status)
				}
				status = args[0]
			}
			return a.setPresence(ctx, status)
		})(cmd, args)
	}
	setPresence.Flags().StringVar(&status, "status", "", "online, away or offline (or give it as the argument)")
	return group("users", "User profiles and presence", get, set, presence, setPresence)
}

// presenceStatuses are the statuses buzz-acp and upstream's clients publish.
var presenceStatuses = map[string]bool{"online": true, "away": true, "offline": true}

// setPresence publishes kind 20001 (content and a status tag, as upstream) over a WebSocket
// session authenticated with NIP-42, and waits for the relay's OK.
func (a *app) setPresence(ctx context.Context, status string) (any, error) {
	if !presenceStatuses[status] {
		return nil, usageError("the status must be online, away or offline, got %q", status)
	}
	b, err := a.bridge() // checks the key, the relay URL and the timeouts
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, a.options().Timeout)
	defer cancel()
	live := client.NewLive(client.LiveConfig{RelayURL: a.options().RelayURL, SecretKey: b.SecretKey(), HandshakeTimeout: a.options().Connect})
	done := make(chan struct{})
	go func() { defer close(done); _ = live.Run(ctx) }()
	defer func() { cancel(); <-done }()
	ev := &nostr.Event{Kind: protocol.KindPresence, Content: status, Tags: nostr.Tags{{"status", status}}}
	if err := live.Publish(ctx, ev); err != nil {
		var re *client.RejectedError
		if errors.As(err, &re) {
			return nil, rejected(re.Message)
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, &Error{Category: "network_error", Message: "no answer from the relay over WebSocket within " + a.options().Timeout.String(), Retryable: true, Code: ExitNetwork}
		}
		return nil, err
	}
	return writeResult{EventID: ev.ID, Accepted: true}, nil
}

// presenceInfo is one line of users presence (upstream's shape).
type presenceInfo struct {
	Pubkey    string `json:"pubkey"`
	Status    string `json:"status"`
	UpdatedAt int64  `json:"updated_at"`
}

// presence asks the relay for the pubkeys' current status. The relay answers from memory with
// signed kind 20001 events, one per pubkey that has a live status (upstream's convention).
func (a *app) presence(ctx context.Context, list string) (any, error) {
	var pks []string
	for _, s := range strings.Split(list, ",") {
		pk, err := protocol.ParsePubkey(strings.TrimSpace(s))
		if err != nil {
			return nil, usageError("--pubkeys: %s", err)
		}
		pks = appendNew(pks, pk)
	}
	if len(pks) > 500 {
		return nil, usageError("--pubkeys: at most 500")
	}
	b, err := a.bridge()
	if err != nil {
		return nil, err
	}
	evs, err := b.Query(ctx, client.Filter{Filter: nostr.Filter{Kinds: []int{kindPresenceQuery}, Authors: pks, Limit: len(pks)}})
	if err != nil {
		return nil, err
	}
	asked := map[string]bool{}
	for _, pk := range pks {
		asked[pk] = true
	}
	out := []presenceInfo{}
	for _, ev := range evs {
		subject := protocol.TagValue(ev.Tags, "p")
		if subject == "" {
			subject = ev.PubKey
		}
		if asked[subject] && ev.Kind == protocol.KindPresence {
			out = append(out, presenceInfo{Pubkey: subject, Status: ev.Content, UpdatedAt: int64(ev.CreatedAt)})
			delete(asked, subject)
		}
	}
	return out, nil
}

// kindPresenceQuery is the relay-only kind upstream's CLI names to ask for presence.
const kindPresenceQuery = 40902

func latestProfile(ctx context.Context, b *client.Bridge, pk string) (*nostr.Event, error) {
	return queryNewest(ctx, b, nostr.Filter{Kinds: []int{protocol.KindProfile}, Authors: []string{pk}, Limit: 1})
}

func (a *app) react(ctx context.Context, event, emoji string) (any, error) {
	id, err := eventIDArg("event", event)
	if err != nil {
		return nil, err
	}
	if emoji == "" {
		return nil, usageError("--emoji must not be empty")
	}
	b, err := a.bridge()
	if err != nil {
		return nil, err
	}
	target, err := queryOne(ctx, b, nostr.Filter{IDs: []string{id}})
	if err != nil {
		return nil, err
	}
	if target == nil {
		return nil, notFound("event %s not found (or not visible to you)", id)
	}
	tags := nostr.Tags{{"e", target.ID}, {"p", target.PubKey}}
	if ch, ok := protocol.ChannelID(target.Tags); ok {
		tags = append(tags, nostr.Tag{"h", ch})
	}
	tags = append(tags, nostr.Tag{"k", strconv.Itoa(target.Kind)})
	return publish(ctx, b, &nostr.Event{Kind: protocol.KindReaction, Content: emoji, Tags: tags})
}

// canvasInfo is canvas get's output.
type canvasInfo struct {
	EventID   string `json:"event_id"`
	Content   string `json:"content"`
	CreatedAt int64  `json:"created_at"`
	Pubkey    string `json:"pubkey"`
}

func (a *app) canvasCommand() *cobra.Command {
	var getCh string
	get := a.leaf("get", "Show a channel's canvas (latest kind 40100); null if none", func(ctx context.Context, cmd *cobra.Command) (any, error) {
		return a.canvasGet(ctx, getCh)
	})
	requiredString(get, &getCh, "channel", "channel UUID")

	var setCh, content string
	set := a.leaf("set", "Replace a channel's canvas (kind 40100)", func(ctx context.Context, cmd *cobra.Command) (any, error) {
		return a.canvasSet(ctx, setCh, content)
	})
	requiredString(set, &setCh, "channel", "channel UUID")
	requiredString(set, &content, "content", "canvas text, or - to read stdin")
	return group("canvas", "Channel canvas", get, set)
}

func (a *app) canvasGet(ctx context.Context, channel string) (any, error) {
	ch, err := channelArg(channel)
	if err != nil {
		return nil, err
	}
	b, err := a.bridge()
	if err != nil {
		return nil, err
	}
	evs, err := queryInChannel(ctx, b, ch, client.Filter{Filter: nostr.Filter{Kinds: []int{protocol.KindCanvas}, Tags: nostr.TagMap{"h": {ch}}, Limit: 1}})
	if err != nil {
		return nil, err
	}
	ev := newest(evs)
	if ev == nil {
		return nil, nil
	}
	return canvasInfo{EventID: ev.ID, Content: ev.Content, CreatedAt: int64(ev.CreatedAt), Pubkey: ev.PubKey}, nil
}

func (a *app) canvasSet(ctx context.Context, channel, content string) (any, error) {
	ch, err := channelArg(channel)
	if err != nil {
		return nil, err
	}
	text, err := a.readContent("canvas", content)
	if err != nil {
		return nil, err
	}
	b, err := a.bridge()
	if err != nil {
		return nil, err
	}
	return publish(ctx, b, &nostr.Event{Kind: protocol.KindCanvas, Content: text, Tags: nostr.Tags{{"h", ch}}})
}
