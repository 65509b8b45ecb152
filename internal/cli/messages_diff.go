package cli

import (
	"context"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/nbd-wtf/go-nostr"
	"github.com/spf13/cobra"

	"github.com/buzz-harness/buzz/internal/protocol"
)

// maxDiffBytes is upstream's cap on a diff message's content (kind 40008).
const maxDiffBytes = 60 << 10

// diffOptions are the inputs of messages send-diff (upstream's DiffMeta).
type diffOptions struct {
	channel, diff, repo, commit, file, parentCommit string
	sourceBranch, targetBranch, lang, description   string
	replyTo                                         string
	pr                                              int
}

func (a *app) sendDiffCommand() *cobra.Command {
	var o diffOptions
	cmd := a.leaf("send-diff", "Send a code diff (kind 40008) with its repo, commit and file; the console shows it as a diff", func(ctx context.Context, cmd *cobra.Command) (any, error) {
		return a.sendDiff(ctx, o)
	})
	requiredString(cmd, &o.channel, "channel", "channel UUID")
	requiredString(cmd, &o.diff, "diff", "the unified diff, or - to read stdin")
	requiredString(cmd, &o.repo, "repo", "repository URL (http:// or https://)")
	requiredString(cmd, &o.commit, "commit", "commit sha the diff belongs to (hex, at least 7)")
	fl := cmd.Flags()
	fl.StringVar(&o.file, "file", "", "path of the file the diff changes")
	fl.StringVar(&o.parentCommit, "parent-commit", "", "parent commit sha (hex, at least 7)")
	fl.StringVar(&o.sourceBranch, "source-branch", "", "branch the change comes from (with --target-branch)")
	fl.StringVar(&o.targetBranch, "target-branch", "", "branch the change goes to (with --source-branch)")
	fl.IntVar(&o.pr, "pr", 0, "pull request number")
	fl.StringVar(&o.lang, "lang", "", "language for highlighting (default: from --file's extension)")
	fl.StringVar(&o.description, "description", "", "one line on what the diff does")
	fl.StringVar(&o.replyTo, "reply-to", "", "event id to reply to")
	return cmd
}

func (a *app) sendDiff(ctx context.Context, o diffOptions) (any, error) {
	ch, err := channelArg(o.channel)
	if err != nil {
		return nil, err
	}
	if u, err := url.Parse(o.repo); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usageError("--repo must be an http:// or https:// URL, got %q", o.repo)
	}
	if !isShortHex(o.commit) {
		return nil, usageError("--commit must be a hex commit sha of at least 7 characters, got %q", o.commit)
	}
	if o.parentCommit != "" && !isShortHex(o.parentCommit) {
		return nil, usageError("--parent-commit must be a hex commit sha of at least 7 characters, got %q", o.parentCommit)
	}
	if (o.sourceBranch == "") != (o.targetBranch == "") {
		return nil, usageError("--source-branch and --target-branch go together")
	}
	if o.pr < 0 {
		return nil, usageError("--pr must be a positive number")
	}
	diff, err := a.readContent("the diff", o.diff)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(diff) == "" {
		return nil, usageError("the diff is blank")
	}
	// Upstream truncates a longer diff; we refuse it, so that nothing accepted is silently cut.
	if len(diff) > maxDiffBytes {
		return nil, usageError("the diff is %d bytes; the limit is %d (60 KiB): send it in parts, one per file", len(diff), maxDiffBytes)
	}
	var parent string
	if o.replyTo != "" {
		if parent, err = eventIDArg("reply-to", o.replyTo); err != nil {
			return nil, err
		}
	}
	b, err := a.bridge()
	if err != nil {
		return nil, err
	}
	tags := nostr.Tags{{"h", ch}, {"repo", o.repo}, {"commit", strings.ToLower(o.commit)}}
	if o.file != "" {
		tags = append(tags, nostr.Tag{"file", o.file})
	}
	if o.parentCommit != "" {
		tags = append(tags, nostr.Tag{"parent-commit", strings.ToLower(o.parentCommit)})
	}
	if o.sourceBranch != "" {
		tags = append(tags, nostr.Tag{"branch", o.sourceBranch, o.targetBranch})
	}
	if o.pr > 0 {
		tags = append(tags, nostr.Tag{"pr", strconv.Itoa(o.pr)})
	}
	if lang := cmpOr(o.lang, langOf(o.file)); lang != "" {
		tags = append(tags, nostr.Tag{"l", lang})
	}
	if o.description != "" {
		tags = append(tags, nostr.Tag{"description", o.description})
	}
	if parent != "" {
		replyTags, err := replyTagsFor(ctx, b, ch, parent)
		if err != nil {
			return nil, err
		}
		tags = append(tags, replyTags...)
	}
	return publish(ctx, b, &nostr.Event{Kind: protocol.KindDiffMessage, Content: diff, Tags: tags})
}

func isShortHex(s string) bool {
	if len(s) < 7 || len(s) > 64 {
		return false
	}
	for _, c := range strings.ToLower(s) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// diffLangs maps common file extensions to a highlighting language, for --lang's default.
var diffLangs = map[string]string{
	"go": "go", "rs": "rust", "py": "python", "rb": "ruby", "java": "java", "kt": "kotlin",
	"swift": "swift", "c": "c", "h": "c", "cc": "cpp", "cpp": "cpp", "cs": "csharp",
	"js": "javascript", "mjs": "javascript", "ts": "typescript", "tsx": "typescript",
	"sh": "bash", "sql": "sql", "json": "json", "yaml": "yaml", "yml": "yaml", "toml": "toml",
	"html": "html", "css": "css", "md": "markdown",
}

func langOf(file string) string {
	return diffLangs[strings.ToLower(strings.TrimPrefix(filepath.Ext(file), "."))]
}

func (a *app) voteCommand() *cobra.Command {
	var event, direction string
	cmd := a.leaf("vote", "Vote a forum post or comment up or down (kind 45002)", func(ctx context.Context, cmd *cobra.Command) (any, error) {
		id, err := eventIDArg("event", event)
		if err != nil {
			return nil, err
		}
		content := map[string]string{"up": "+", "down": "-"}[direction]
		if content == "" {
			return nil, usageError("--direction must be up or down, got %q", direction)
		}
		b, err := a.bridge()
		if err != nil {
			return nil, err
		}
		_, ch, err := targetInChannel(ctx, b, id)
		if err != nil {
			return nil, err
		}
		return publish(ctx, b, &nostr.Event{Kind: protocol.KindForumVote, Content: content, Tags: nostr.Tags{{"h", ch}, {"e", id}}})
	})
	requiredString(cmd, &event, "event", "the forum post or comment")
	requiredString(cmd, &direction, "direction", "up or down")
	return cmd
}
