package protocol

import (
	"slices"
	"testing"

	"github.com/nbd-wtf/go-nostr"
)

func ids(evs []nostr.Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.ID
	}
	return out
}

func TestNewestByDKeepsNewestVersionPerDTagNewestFirst(t *testing.T) {
	evs := []nostr.Event{
		{ID: "c1-old", CreatedAt: 10, Tags: nostr.Tags{{"d", "c1"}}},
		{ID: "c2", CreatedAt: 15, Tags: nostr.Tags{{"d", "c2"}}},
		{ID: "c1-new", CreatedAt: 20, Tags: nostr.Tags{{"d", "c1"}}},
		{ID: "c1-mid", CreatedAt: 12, Tags: nostr.Tags{{"d", "c1"}}},
	}
	if got, want := ids(NewestByD(evs)), []string{"c1-new", "c2"}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestNewestByBreaksCreatedAtTiesByLowestIDWhateverTheOrder(t *testing.T) {
	a := nostr.Event{ID: "aaa", PubKey: "p", CreatedAt: 5}
	b := nostr.Event{ID: "bbb", PubKey: "p", CreatedAt: 5}
	for _, evs := range [][]nostr.Event{{a, b}, {b, a}} {
		if got := ids(NewestByAuthor(evs)); !slices.Equal(got, []string{"aaa"}) {
			t.Fatalf("from %v: got %v, want [aaa]", ids(evs), got)
		}
	}
}

func TestNewestByAuthorKeepsOneEventPerPubkey(t *testing.T) {
	evs := []nostr.Event{
		{ID: "x1", PubKey: "x", CreatedAt: 1},
		{ID: "y1", PubKey: "y", CreatedAt: 3},
		{ID: "x2", PubKey: "x", CreatedAt: 2},
	}
	if got, want := ids(NewestByAuthor(evs)), []string{"y1", "x2"}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if got := NewestByAuthor(nil); len(got) != 0 {
		t.Fatalf("empty input gave %v", got)
	}
}
