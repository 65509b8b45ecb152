package client

import (
	"fmt"
	"testing"
)

func TestIDSetRemembersAtLeastOneGenerationBack(t *testing.T) {
	s := NewIDSet(3)
	for i := range 6 {
		if !s.Add(fmt.Sprint(i)) {
			t.Fatalf("%d reported seen", i)
		}
	}
	// 0..2 rotated into prev when 3 arrived; 3..5 are current.
	for i := 3; i < 6; i++ {
		if s.Add(fmt.Sprint(i)) {
			t.Fatalf("%d forgotten", i)
		}
	}
	s.Add("6") // rotates: prev = 3..5
	if !s.Add("0") {
		t.Fatal("id from two generations ago still remembered")
	}
	if s.Add("5") {
		t.Fatal("id from previous generation forgotten")
	}
}

func TestIDSetForgetMakesAnIDNewAgainInEitherGeneration(t *testing.T) {
	s := NewIDSet(2)
	s.Add("a")
	s.Add("b")
	s.Add("c") // rotates: prev = a, b; cur = c
	s.Forget("a")
	s.Forget("c")
	if !s.Add("a") || !s.Add("c") {
		t.Fatal("forgotten ids still reported seen")
	}
	if s.Add("b") {
		t.Fatal("Forget dropped an id it was not given")
	}
}
