package store_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/relay/store"
)

func TestReplacesKeepsTheNewestVersionAndOnATieTheLowestID(t *testing.T) {
	ev := &nostr.Event{ID: strings.Repeat("5", 64), CreatedAt: 100}
	older := store.Version{ID: strings.Repeat("9", 64), CreatedAt: 99}
	sameTimeHigherID := store.Version{ID: strings.Repeat("6", 64), CreatedAt: 100}
	sameTimeLowerID := store.Version{ID: strings.Repeat("4", 64), CreatedAt: 100}
	newer := store.Version{ID: strings.Repeat("1", 64), CreatedAt: 101}

	got, err := store.Replaces(ev, []store.Version{older, sameTimeHigherID})
	if err != nil || !slices.Equal(got, []int{0, 1}) {
		t.Fatalf("over an older and a tied higher id: %v, %v; want both replaced", got, err)
	}
	for name, stored := range map[string][]store.Version{
		"newer":          {older, newer},
		"tied, lower id": {sameTimeLowerID},
	} {
		if got, err := store.Replaces(ev, stored); !errors.Is(err, store.ErrNewerExists) {
			t.Errorf("%s stored: %v, %v; want ErrNewerExists", name, got, err)
		}
	}
	if _, err := store.Replaces(ev, []store.Version{newer, {ID: ev.ID, CreatedAt: 100}}); !errors.Is(err, store.ErrDuplicate) {
		t.Errorf("the event itself stored: %v, want ErrDuplicate", err)
	}
}

func TestAddressOfNamesTheDTagOfAddressableKindsOnly(t *testing.T) {
	tags := nostr.Tags{{"d", "memory"}}
	if _, ok := store.AddressOf(&nostr.Event{Kind: protocol.KindStreamMessage, Tags: tags}); ok {
		t.Error("a regular event has an address")
	}
	if a, ok := store.AddressOf(&nostr.Event{Kind: protocol.KindProfile, PubKey: "p", Tags: tags}); !ok || a.D != nil || a.Pubkey != "p" {
		t.Errorf("replaceable: %+v %v, want kind and author only", a, ok)
	}
	if a, ok := store.AddressOf(&nostr.Event{Kind: protocol.KindEngram, Tags: tags}); !ok || a.D == nil || *a.D != "memory" {
		t.Errorf("addressable: %+v %v, want its d tag", a, ok)
	}
	if a, ok := store.AddressOf(&nostr.Event{Kind: protocol.KindEngram}); !ok || a.D == nil || *a.D != "" {
		t.Errorf("addressable without a d tag: %+v %v, want the empty d", a, ok)
	}
}
