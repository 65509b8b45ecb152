package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"github.com/spf13/cobra"

	"github.com/buzz-harness/buzz/internal/client"
	"github.com/buzz-harness/buzz/internal/cmdflag"
	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/protocol/engram"
	"github.com/buzz-harness/buzz/internal/protocol/ownerauth"
)

// maxMemStdin caps what `mem set … -` and `mem patch` read: one byte over the NIP-44 plaintext
// limit, so an oversized value is refused rather than silently cut.
const maxMemStdin = engram.MaxBody + 1

// OwnerEnv names the owner for `buzz mem` when --owner is not given. buzz-acp sets it in its
// agents' environment, so an agent's `buzz mem set core -` needs no flags.
const OwnerEnv = "BUZZ_AGENT_OWNER"

// memOpts are the flags shared by every `buzz mem` subcommand.
type memOpts struct {
	owner, agent string
	json         bool
}

// memValue is `mem get`'s answer.
type memValue struct {
	Slug      string `json:"slug"`
	Value     string `json:"value"`
	Hash      string `json:"hash"`
	EventID   string `json:"event_id"`
	CreatedAt int64  `json:"created_at"`
}

// memWrite is the answer to a write (`set`, `patch`, `rm`), or to a `patch --dry-run` (no event).
type memWrite struct {
	Slug      string  `json:"slug"`
	Hash      string  `json:"hash,omitempty"`
	EventID   string  `json:"event_id,omitempty"`
	CreatedAt int64   `json:"created_at,omitempty"`
	Accepted  bool    `json:"accepted"`
	DryRun    bool    `json:"dry_run,omitempty"`
	Value     *string `json:"value,omitempty"` // the patched value, on --dry-run only
}

func conflict(format string, a ...any) *Error {
	return &Error{Category: "conflict", Message: fmt.Sprintf(format, a...), Code: ExitConflict}
}

// memOut is one mem subcommand's answer in both forms: the JSON of --json, and the text form
// upstream prints by default — data on stdout exactly as given (mem get adds no newline, so
// `mem get core > f` and `mem set core - < f` round-trip) and a report for people on stderr.
type memOut struct {
	json           any
	stdout, stderr string
}

// wrote is the stderr report of a published write.
func (w memWrite) wrote(verb string) string {
	return fmt.Sprintf("%s %s (event %s, created_at %d)\n", verb, w.Slug, w.EventID, w.CreatedAt)
}

func (a *app) memCommand() *cobra.Command {
	var o memOpts
	// leaf with positional args: mem subcommands take the slug (and value) as arguments.
	leaf := func(use, short string, args cobra.PositionalArgs, fn func(ctx context.Context, args []string) (memOut, error)) *cobra.Command {
		c := &cobra.Command{Use: use, Short: short, Args: args}
		c.RunE = func(cmd *cobra.Command, args []string) error {
			out, err := fn(cmd.Context(), args)
			if err != nil {
				return classify(err)
			}
			if o.json {
				enc := json.NewEncoder(a.io.Stdout)
				enc.SetEscapeHTML(false)
				err = enc.Encode(out.json)
			} else {
				_, err = io.WriteString(a.io.Stdout, out.stdout)
				if err == nil {
					_, err = io.WriteString(a.io.Stderr, out.stderr)
				}
			}
			if err != nil {
				return &Error{Category: "error", Message: "write output: " + err.Error(), Code: ExitOther}
			}
			return nil
		}
		return c
	}

	ls := leaf("ls", "List the agent's memories (core excluded), sorted by slug: slug, created_at, event id per line", cobra.NoArgs, func(ctx context.Context, _ []string) (memOut, error) {
		b, p, err := a.memPair(o, false)
		if err != nil {
			return memOut{}, err
		}
		evs, err := b.Query(ctx, client.F(p.ListFilter())...)
		if err != nil {
			return memOut{}, err
		}
		list := p.List(evs)
		out := memOut{json: list}
		var sb strings.Builder
		for _, l := range list {
			sb.WriteString(l.String() + "\n")
		}
		out.stdout = sb.String()
		if len(list) == 0 {
			out.stderr = "(no memories besides core)\n"
		}
		return out, nil
	})

	get := leaf("get <slug>", "Print a memory's value (or the core profile) as it is, with no newline added", cobra.ExactArgs(1), func(ctx context.Context, args []string) (memOut, error) {
		v, err := a.memGet(ctx, o, args[0])
		return memOut{json: v, stdout: v.Value}, err
	})

	hash := leaf("hash <slug>", "Print the sha256 of a memory's value, for patch --base-hash", cobra.ExactArgs(1), func(ctx context.Context, args []string) (memOut, error) {
		b, p, err := a.memPair(o, false)
		if err != nil {
			return memOut{}, err
		}
		rec, err := memHead(ctx, b, p, args[0])
		if err != nil {
			return memOut{}, err
		}
		h := engram.Hash(rec.Body.Text)
		return memOut{json: struct {
			Slug string `json:"slug"`
			Hash string `json:"hash"`
		}{rec.Body.Slug, h}, stdout: h + "\n"}, nil
	})

	var allowEmpty bool
	set := leaf("set <slug> <value|->", "Write a memory (or the core profile); - reads the value from stdin", cobra.ExactArgs(2), func(ctx context.Context, args []string) (memOut, error) {
		slug, err := memSlug(args[0])
		if err != nil {
			return memOut{}, err
		}
		value := args[1]
		if value == "-" {
			if value, err = a.readMemStdin("the value"); err != nil {
				return memOut{}, err
			}
			// An empty pipe is usually a mistake upstream of us; an explicit "" argument is not.
			if value == "" && !allowEmpty {
				return memOut{}, usageError("stdin is empty; pass --allow-empty to store an empty value")
			}
		}
		w, err := a.memSet(ctx, o, slug, value)
		return memOut{json: w, stderr: w.wrote("wrote")}, err
	})
	set.Flags().BoolVar(&allowEmpty, "allow-empty", false, "allow an empty value from stdin")

	var patchFile, baseHash string
	var noBaseHash, dryRun, patchAllowEmpty bool
	patch := leaf("patch <slug>", "Apply a unified diff to a memory's value (strict: no fuzz); prints the new sha256", cobra.ExactArgs(1), func(ctx context.Context, args []string) (memOut, error) {
		if (baseHash == "") == !noBaseHash {
			return memOut{}, usageError("pass exactly one of --base-hash <sha256> (from buzz mem hash) or --no-base-hash")
		}
		diff, err := a.readPatch(patchFile)
		if err != nil {
			return memOut{}, err
		}
		b, p, err := a.memPair(o, !dryRun)
		if err != nil {
			return memOut{}, err
		}
		slug, err := memSlug(args[0])
		if err != nil {
			return memOut{}, err
		}
		evs, err := b.Query(ctx, client.F(p.HeadFilter(slug))...)
		if err != nil {
			return memOut{}, err
		}
		rec, err := headOf(p, evs, slug)
		if err != nil {
			return memOut{}, err
		}
		if baseHash != "" {
			if err := engram.CheckBaseHash(baseHash, rec.Body.Text); err != nil {
				if errors.Is(err, engram.ErrConflict) {
					return memOut{}, conflict("%s", err)
				}
				return memOut{}, usageError("%s", err)
			}
		}
		next, err := engram.ApplyPatch(rec.Body.Text, diff)
		if err != nil {
			return memOut{}, usageError("patch: %s", err)
		}
		if next == "" && !patchAllowEmpty {
			return memOut{}, usageError("the patch empties the value; pass --allow-empty to store that")
		}
		h := engram.Hash(next)
		if dryRun {
			// The preview is the value itself, like mem get; its hash goes to the report.
			return memOut{json: memWrite{Slug: slug, Hash: h, DryRun: true, Value: &next}, stdout: next,
				stderr: fmt.Sprintf("dry run: %s would have sha256 %s; nothing published\n", slug, h)}, nil
		}
		w, err := memPublish(ctx, b, p, memBody(slug, next), latest(evs))
		return memOut{json: w, stdout: h + "\n", stderr: w.wrote("wrote")}, err
	})
	pf := patch.Flags()
	pf.StringVar(&patchFile, "patch-file", "", "file holding the unified diff (default: stdin)")
	pf.StringVar(&baseHash, "base-hash", "", "sha256 of the value the diff was made against (buzz mem hash)")
	pf.BoolVar(&noBaseHash, "no-base-hash", false, "apply without checking the base value's hash")
	pf.BoolVar(&dryRun, "dry-run", false, "print the patched value and its hash; publish nothing")
	pf.BoolVar(&patchAllowEmpty, "allow-empty", false, "allow a patch that empties the value")

	rm := leaf("rm <slug>", "Delete a memory (publishes a tombstone); core cannot be removed", cobra.ExactArgs(1), func(ctx context.Context, args []string) (memOut, error) {
		slug, err := memSlug(args[0])
		if err != nil {
			return memOut{}, err
		}
		if slug == engram.CoreSlug {
			return memOut{}, usageError("core cannot be removed; use buzz mem set core '' to clear it")
		}
		b, p, err := a.memPair(o, true)
		if err != nil {
			return memOut{}, err
		}
		evs, err := b.Query(ctx, client.F(p.HeadFilter(slug))...)
		if err != nil {
			return memOut{}, err
		}
		if _, err := headOf(p, evs, slug); err != nil {
			return memOut{}, err
		}
		w, err := memPublish(ctx, b, p, engram.TombstoneBody(slug), latest(evs))
		return memOut{json: w, stderr: w.wrote("removed")}, err
	})

	g := group("mem", "The agent's encrypted memory (NIP-AE engrams): core profile and mem/… records", ls, get, hash, set, patch, rm)
	f := cmdflag.On(g.PersistentFlags())
	f.String(&o.owner, "owner", OwnerEnv, "", "as the agent: the owner's pubkey, hex or npub (default: the owner in BUZZ_AUTH_TAG)")
	g.PersistentFlags().StringVar(&o.agent, "agent", "", "as the owner: the agent's pubkey, hex or npub (read-only)")
	g.PersistentFlags().BoolVar(&o.json, "json", false, "print JSON objects (value, hash, event id) instead of upstream's text")
	return g
}

// memPair resolves whose memory this is. As the agent (the default) the key is the agent's and
// the owner comes from --owner or BUZZ_AUTH_TAG; with --agent the key is the owner's and only
// reads are possible.
func (a *app) memPair(o memOpts, write bool) (*client.Bridge, *engram.Pair, error) {
	b, err := a.bridge()
	if err != nil {
		return nil, nil, err
	}
	if o.agent != "" {
		if o.owner != "" {
			return nil, nil, usageError("--owner and --agent are mutually exclusive")
		}
		if write {
			return nil, nil, usageError("--agent reads an agent's memory as its owner; only the agent can write it")
		}
		agent, err := protocol.ParsePubkey(o.agent)
		if err != nil {
			return nil, nil, usageError("--agent: %s", err)
		}
		p, err := engram.OwnerSide(b.SecretKey(), agent)
		if err != nil {
			return nil, nil, usageError("%s", err)
		}
		return b, p, nil
	}
	var owner string
	switch {
	case o.owner != "":
		if owner, err = protocol.ParsePubkey(o.owner); err != nil {
			return nil, nil, usageError("--owner: %s", err)
		}
	case a.options().AuthTag != "":
		if owner, err = ownerauth.ResolveOwner(a.options().AuthTag, b.PublicKey()); err != nil {
			return nil, nil, usageError("no owner: %s; pass --owner", err)
		}
	default:
		return nil, nil, usageError("no owner: pass --owner <pubkey> (or set %s or BUZZ_AUTH_TAG); as the owner, pass --agent <pubkey>", OwnerEnv)
	}
	p, err := engram.AgentSide(b.SecretKey(), owner)
	if err != nil {
		return nil, nil, usageError("%s", err)
	}
	return b, p, nil
}

func memSlug(raw string) (string, error) {
	slug, err := engram.NormalizeSlug(raw)
	if err != nil {
		return "", usageError("slug %q: %s", raw, err)
	}
	return slug, nil
}

func memBody(slug, value string) engram.Body {
	if slug == engram.CoreSlug {
		return engram.CoreBody(value)
	}
	return engram.MemoryBody(slug, value)
}

// memHead fetches the live head of a slug: not_found when there is none or it is a tombstone.
func memHead(ctx context.Context, b *client.Bridge, p *engram.Pair, raw string) (engram.Record, error) {
	slug, err := memSlug(raw)
	if err != nil {
		return engram.Record{}, err
	}
	evs, err := b.Query(ctx, client.F(p.HeadFilter(slug))...)
	if err != nil {
		return engram.Record{}, err
	}
	return headOf(p, evs, slug)
}

// memGet is `buzz mem get`: the live value of a memory, with its hash and event.
func (a *app) memGet(ctx context.Context, o memOpts, slug string) (memValue, error) {
	b, p, err := a.memPair(o, false)
	if err != nil {
		return memValue{}, err
	}
	rec, err := memHead(ctx, b, p, slug)
	if err != nil {
		return memValue{}, err
	}
	return memValue{Slug: rec.Body.Slug, Value: rec.Body.Text, Hash: engram.Hash(rec.Body.Text),
		EventID: rec.Event.ID, CreatedAt: int64(rec.Event.CreatedAt)}, nil
}

// memSet is `buzz mem set`: a new value superseding whatever the relay holds for the slug.
func (a *app) memSet(ctx context.Context, o memOpts, raw, value string) (memWrite, error) {
	slug, err := memSlug(raw)
	if err != nil {
		return memWrite{}, err
	}
	b, p, err := a.memPair(o, true)
	if err != nil {
		return memWrite{}, err
	}
	evs, err := b.Query(ctx, client.F(p.HeadFilter(slug))...)
	if err != nil {
		return memWrite{}, err
	}
	return memPublish(ctx, b, p, memBody(slug, value), latest(evs))
}

// headOf picks the live head from a HeadFilter answer. Records that exist but cannot be read
// are reported as such, not as "not found": a key mix-up must not look like an empty memory.
func headOf(p *engram.Pair, evs []nostr.Event, slug string) (engram.Record, error) {
	rec, ok, invalid := p.Head(evs, slug)
	switch {
	case ok && !rec.Body.Tombstone:
		return rec, nil
	case !ok && invalid > 0 && invalid == len(evs):
		return engram.Record{}, &Error{Category: "error", Code: ExitOther,
			Message: "memory " + slug + ": the relay holds records that could not be validated or decrypted with this key pair"}
	}
	return engram.Record{}, notFound("no memory %q", slug)
}

// latest is the newest created_at among the events (valid or not): a write must supersede
// whatever the relay holds under that d tag.
func latest(evs []nostr.Event) nostr.Timestamp {
	var t nostr.Timestamp
	for _, ev := range evs {
		t = max(t, ev.CreatedAt)
	}
	return t
}

func memPublish(ctx context.Context, b *client.Bridge, p *engram.Pair, body engram.Body, prior nostr.Timestamp) (memWrite, error) {
	ev, err := p.Build(body, engram.NextCreatedAt(time.Now(), prior), nil)
	if err != nil {
		return memWrite{}, usageError("%s", err)
	}
	res, err := b.Publish(ctx, &ev)
	if err != nil {
		return memWrite{}, err
	}
	if !res.Accepted {
		if protocol.ReasonOf(res.Message) == protocol.ReasonDuplicate {
			return memWrite{}, conflict("%s", res.Message)
		}
		return memWrite{}, rejected(res.Message)
	}
	out := memWrite{Slug: body.Slug, EventID: ev.ID, CreatedAt: int64(ev.CreatedAt), Accepted: true}
	if !body.Tombstone {
		out.Hash = engram.Hash(body.Text)
	}
	return out, nil
}

func (a *app) readMemStdin(what string) (string, error) {
	if a.io.Stdin == nil {
		return "", usageError("%s: no stdin", what)
	}
	return readCapped(a.io.Stdin, what)
}

func readCapped(r io.Reader, what string) (string, error) {
	raw, err := io.ReadAll(io.LimitReader(r, maxMemStdin+1))
	if err != nil {
		return "", usageError("read %s: %s", what, err)
	}
	if len(raw) > maxMemStdin {
		return "", usageError("%s is over %d bytes", what, maxMemStdin)
	}
	return string(raw), nil
}

// readPatch returns the diff from --patch-file, or stdin without one.
func (a *app) readPatch(file string) (string, error) {
	if file == "" || file == "-" {
		return a.readMemStdin("the patch")
	}
	f, err := os.Open(file)
	if err != nil {
		return "", usageError("--patch-file: %s", err)
	}
	defer f.Close()
	return readCapped(f, "the patch")
}
