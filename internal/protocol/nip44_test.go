package protocol

import (
	"bytes"
	"strings"
	"testing"

	"github.com/nbd-wtf/go-nostr"
)

// BIP-340 test vector 0 (secret …03, message and aux all zeros), the self-check NIP-AE names for
// "aux = zeros is not the same as no aux".
func TestSignHashReproducesBIP340Vector0(t *testing.T) {
	signer, err := NewSigner(strings.Repeat("0", 63) + "3")
	if err != nil {
		t.Fatal(err)
	}
	pub := signer.PublicKey()
	sig, err := signer.SignHash([32]byte{}, bytes.NewReader(make([]byte, 32)))
	if err != nil {
		t.Fatal(err)
	}
	const want = "e907831f80848d1069a5371b402410364bdf1c5f8307b0084c55f1ce2dca821525f66a4a85ea8b71e482a74f382d2ce5ebeee8fdb2172f477df4900d310536c0"
	if sig != want {
		t.Fatalf("sig = %s, want %s", sig, want)
	}
	if pub != "f9308a019258c31049344f85f89d5229b531c845836f99b08601f113bce036f9" || !VerifyHash([32]byte{}, pub, sig) {
		t.Fatalf("pubkey %s or verification wrong", pub)
	}
	if VerifyHash([32]byte{1}, pub, sig) {
		t.Fatal("signature verified for another message")
	}
}

func TestSignEventMakesAValidEvent(t *testing.T) {
	ev := nostr.Event{Kind: 1, CreatedAt: 1, Content: "hi"}
	if err := SignEvent(&ev, strings.Repeat("0", 63)+"1", nil); err != nil {
		t.Fatal(err)
	}
	if err := CheckEvent(&ev); err != nil {
		t.Fatal(err)
	}
}

func TestConversationKeyIsSymmetricAndRejectsBadKeys(t *testing.T) {
	sk1, sk2 := strings.Repeat("0", 63)+"1", strings.Repeat("0", 63)+"2"
	pk1, _ := PublicKey(sk1)
	pk2, _ := PublicKey(sk2)
	a, err1 := ConversationKey(sk1, pk2)
	b, err2 := ConversationKey(sk2, pk1)
	if err1 != nil || err2 != nil || a != b {
		t.Fatalf("keys differ or fail: %v %v", err1, err2)
	}
	for _, pk := range []string{strings.ToUpper(pk2), pk2[:62], strings.Repeat("0", 63) + "5"} {
		if _, err := ConversationKey(sk1, pk); err == nil {
			t.Errorf("ConversationKey accepted pubkey %q", pk)
		}
	}
	if _, err := NewSigner(strings.Repeat("f", 64)); err == nil {
		t.Error("NewSigner accepted a key above the curve order")
	}
	if _, err := NewSigner(strings.Repeat("0", 64)); err == nil {
		t.Error("NewSigner accepted zero")
	}
}

func TestEncrypt44RoundTripsAndBoundsPlaintext(t *testing.T) {
	var k [32]byte
	k[0] = 7
	ct, err := Encrypt44("hello", k, nil)
	if err != nil {
		t.Fatal(err)
	}
	if pt, err := Decrypt44(ct, k); err != nil || pt != "hello" {
		t.Fatalf("round trip = %q, %v", pt, err)
	}
	k[1] = 1
	if _, err := Decrypt44(ct, k); err == nil {
		t.Fatal("decrypted under the wrong key")
	}
	for _, n := range []int{0, NIP44MaxPlaintext + 1} {
		if _, err := Encrypt44(strings.Repeat("a", n), k, nil); err == nil {
			t.Errorf("encrypted %d bytes", n)
		}
	}
	if _, err := Encrypt44(strings.Repeat("a", NIP44MaxPlaintext), k, nil); err != nil {
		t.Errorf("the largest plaintext was refused: %v", err)
	}
}
