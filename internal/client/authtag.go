package client

import (
	"fmt"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol/ownerauth"
)

// AddAuthTag puts the NIP-OA auth tag tagJSON (BUZZ_AUTH_TAG form; "" = none) on an unsigned
// event, exactly as given, as upstream's CLI and buzz-acp do on every event they sign: it is how
// other clients see who owns the agent. A signed event is left alone (its tags are fixed, and
// some kinds, 44200 and 30174, are built with exactly their own tags), and so is one that
// already carries an auth tag.
func AddAuthTag(ev *nostr.Event, tagJSON string) error {
	if tagJSON == "" || ev.Sig != "" {
		return nil
	}
	tag, err := ownerauth.Parse(tagJSON)
	if err != nil {
		return fmt.Errorf("BUZZ_AUTH_TAG: %w", err)
	}
	addAuthTag(ev, tag.NostrTag())
	return nil
}

// addAuthTag appends tag (nil = none) unless ev already has an auth tag.
func addAuthTag(ev *nostr.Event, tag nostr.Tag) {
	if tag == nil || ev.Tags.Find(ownerauth.TagName) != nil {
		return
	}
	ev.Tags = append(ev.Tags, tag)
}
