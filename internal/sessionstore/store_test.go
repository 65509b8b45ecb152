package sessionstore

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/buzz-harness/buzz/internal/atomicfile"
	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/testbin"
)

const (
	testPK   = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	chanA    = "11111111-1111-4111-8111-111111111111"
	chanB    = "22222222-2222-4222-8222-222222222222"
	relay    = "ws://127.0.0.1:3000"
	agentCmd = "goose acp"

	holdLockEnv = "SESSIONSTORE_TEST_HOLD_LOCK_DIR"
)

var scope = Origin{RelayURL: relay, AgentCommand: agentCmd}

// conv reads a conversation from its file form ("<channel>" or "<channel>:<root>").
func conv(key string) protocol.Conversation {
	ch, root, _ := strings.Cut(key, ":")
	return protocol.Conversation{Channel: ch, Root: root}
}

// flush waits for the writer, as a reader of the file must.
func flush(t *testing.T, s *Store) {
	t.Helper()
	if err := s.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestMain doubles as the lock-holding child process for the cross-process lock test.
func TestMain(m *testing.M) {
	if dir := os.Getenv(holdLockEnv); dir != "" {
		s, err := Open(dir, testPK, nil)
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println("locked")
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n') // hold until the parent closes stdin
		_ = s.Close()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func newLogger() (*slog.Logger, *testbin.Output) {
	lb := &testbin.Output{}
	return slog.New(slog.NewTextHandler(lb, nil)), lb
}

func mustOpen(t *testing.T, dir string) *Store {
	t.Helper()
	lg, _ := newLogger()
	s, err := Open(dir, testPK, lg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func rec(sid string) Record {
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	return Record{SessionID: sid, RelayURL: relay, AgentCommand: agentCmd, CreatedAt: t0, LastUsedAt: t0}
}

func TestPutThenReopenReturnsSameRecord(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir)
	if err := s.Put(conv(chanA), rec("sess-a")); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(conv(chanB), rec("sess-b")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s2 := mustOpen(t, dir)
	if s2.Len() != 2 {
		t.Fatalf("Len = %d, want 2", s2.Len())
	}
	got, ok := s2.Get(conv(chanA), scope)
	if !ok || got != rec("sess-a") {
		t.Fatalf("Get(chanA) = %+v, %v; want %+v", got, ok, rec("sess-a"))
	}
}

func TestRemoveForgetsAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir)
	_ = s.Put(conv(chanA), rec("sess-a"))
	_ = s.Put(conv(chanB), rec("sess-b"))
	s.Remove(conv(chanA))
	if _, ok := s.Get(conv(chanA), scope); ok {
		t.Fatal("removed channel still found before reopen")
	}
	_ = s.Close()

	s2 := mustOpen(t, dir)
	if _, ok := s2.Get(conv(chanA), scope); ok {
		t.Fatal("removed channel found after reopen")
	}
	if _, ok := s2.Get(conv(chanB), scope); !ok {
		t.Fatal("other channel lost by Remove")
	}
}

func TestFileIsPrivateVersionedAndKeyedByPubkey(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state", "nested")
	s := mustOpen(t, dir)
	_ = s.Put(conv(chanA), rec("sess-a"))
	flush(t, s)
	if want := filepath.Join(dir, "sessions-"+testPK+".json"); s.Path() != want {
		t.Fatalf("Path = %s, want %s", s.Path(), want)
	}
	st, err := os.Stat(s.Path())
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("file mode %v, want 0600", st.Mode().Perm())
	}
	dst, _ := os.Stat(dir)
	if dst.Mode().Perm() != 0o700 {
		t.Errorf("dir mode %v, want 0700", dst.Mode().Perm())
	}
	var raw struct {
		Version     int                        `json:"version"`
		AgentPubkey string                     `json:"agentPubkey"`
		Sessions    map[string]json.RawMessage `json:"sessions"`
	}
	data, _ := os.ReadFile(s.Path())
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	if raw.Version != 1 || raw.AgentPubkey != testPK || len(raw.Sessions) != 1 {
		t.Fatalf("file = %s", data)
	}
	for _, key := range []string{`"sessionId"`, `"relayUrl"`, `"agentCommand"`, `"createdAt"`, `"lastUsedAt"`} {
		if !bytes.Contains(raw.Sessions[chanA], []byte(key)) {
			t.Errorf("record lacks %s: %s", key, raw.Sessions[chanA])
		}
	}
}

func TestMalformedFileIsEmptyWithOneWarningAndOverwrittenOnNextWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, FileName(testPK))
	if err := os.WriteFile(path, []byte(`{"version":1,"sessions":{`), 0o600); err != nil {
		t.Fatal(err)
	}
	lg, logs := newLogger()
	s, err := Open(dir, testPK, lg)
	if err != nil {
		t.Fatalf("Open on malformed file must not fail: %v", err)
	}
	defer s.Close()
	if s.Len() != 0 {
		t.Fatalf("Len = %d, want 0", s.Len())
	}
	if w := logs.Lines("level=WARN"); len(w) != 1 || !strings.Contains(w[0], path) {
		t.Fatalf("want exactly one warning naming the file, got %q", w)
	}
	if err := s.Put(conv(chanA), rec("sess-a")); err != nil {
		t.Fatal(err)
	}
	flush(t, s)
	data, _ := os.ReadFile(path)
	if _, err := decode(data, testPK); err != nil {
		t.Fatalf("file not overwritten with a valid store: %v\n%s", err, data)
	}
}

func TestFileOfOtherVersionOrPubkeyIsTreatedAsEmpty(t *testing.T) {
	for name, body := range map[string]string{
		"version": `{"version":2,"agentPubkey":"` + testPK + `","sessions":{"` + chanA + `":{"sessionId":"x"}}}`,
		"pubkey":  `{"version":1,"agentPubkey":"ffff","sessions":{"` + chanA + `":{"sessionId":"x"}}}`,
		"legacy":  `{"` + chanA + `":"sess-a"}`,
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			_ = os.WriteFile(filepath.Join(dir, FileName(testPK)), []byte(body), 0o600)
			lg, logs := newLogger()
			s, err := Open(dir, testPK, lg)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if s.Len() != 0 || len(logs.Lines("level=WARN")) != 1 {
				t.Fatalf("Len = %d, warnings = %q; want 0 records and one warning", s.Len(), logs.Lines("level=WARN"))
			}
		})
	}
}

func TestMissingFileIsEmptyWithoutWarning(t *testing.T) {
	lg, logs := newLogger()
	s, err := Open(t.TempDir(), testPK, lg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Len() != 0 || len(logs.Lines("level=WARN")) != 0 {
		t.Fatalf("Len = %d, warnings = %q", s.Len(), logs.Lines("level=WARN"))
	}
}

func TestRecordFromOtherRelayOrAgentCommandIsNotResumed(t *testing.T) {
	s := mustOpen(t, t.TempDir())
	_ = s.Put(conv(chanA), rec("sess-a"))
	cases := map[string]Origin{
		"other relay":   {RelayURL: "wss://relay.example.com", AgentCommand: agentCmd},
		"other command": {RelayURL: relay, AgentCommand: "claude-code-acp"},
	}
	for name, sc := range cases {
		if got, ok := s.Get(conv(chanA), sc); ok {
			t.Errorf("%s: Get = %+v, want not found", name, got)
		}
	}
	// Spelling differences of the same relay still match.
	if _, ok := s.Get(conv(chanA), Origin{RelayURL: "ws://localhost:3000/", AgentCommand: agentCmd}); !ok {
		t.Error("same relay spelled ws://localhost:3000/ did not match")
	}
}

func TestDisabledStoreRemembersNothing(t *testing.T) {
	s := Disabled()
	if err := s.Put(conv(chanA), rec("sess-a")); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Get(conv(chanA), scope); ok {
		t.Fatal("disabled store returned a record")
	}
	s.Touch(conv(chanA), time.Now())
	s.Remove(conv(chanA))
	if s.Len() != 0 || s.Path() != "" || s.Enabled() {
		t.Fatalf("Len=%d Path=%q Enabled=%v", s.Len(), s.Path(), s.Enabled())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestSecondOpenInSameProcessFailsNamingOurPid(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir)
	_, err := Open(dir, testPK, nil)
	if err == nil {
		t.Fatal("second Open succeeded")
	}
	want := fmt.Sprintf("session store %s is locked by pid %d (another buzz-acp with the same key and state dir?)", s.Path(), os.Getpid())
	if err.Error() != want {
		t.Fatalf("error = %q\nwant    %q", err, want)
	}
	// A different key in the same dir is a different store.
	other := strings.Repeat("b", 64)
	s2, err := Open(dir, other, nil)
	if err != nil {
		t.Fatalf("Open with another key: %v", err)
	}
	_ = s2.Close()
}

func TestCloseReleasesLock(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, testPK, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(dir, testPK, nil)
	if err != nil {
		t.Fatalf("reopen after Close: %v", err)
	}
	_ = s2.Close()
}

func TestOpenFailsWhileAnotherProcessHoldsLockAndNamesItsPid(t *testing.T) {
	dir := t.TempDir()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), holdLockEnv+"="+dir)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stdin.Close(); _ = cmd.Wait() }()

	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "locked" {
		t.Fatalf("child did not take the lock: %q %v", line, err)
	}
	_, err = Open(dir, testPK, nil)
	if err == nil {
		t.Fatal("Open succeeded while the child holds the lock")
	}
	if !strings.Contains(err.Error(), "locked by pid "+strconv.Itoa(cmd.Process.Pid)+" ") {
		t.Fatalf("error %q does not name child pid %d", err, cmd.Process.Pid)
	}

	// When the child exits, the lock is ours.
	_ = stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
	s, err := Open(dir, testPK, nil)
	if err != nil {
		t.Fatalf("Open after child exit: %v", err)
	}
	_ = s.Close()
}

func TestCrashBetweenTempWriteAndRenameLeavesOldFileIntact(t *testing.T) {
	dir := t.TempDir()
	crash := errors.New("simulated crash")
	var crashing atomic.Bool
	var tmpSeen string
	lg, _ := newLogger()
	s, err := Open(dir, testPK, lg, atomicfile.BeforeRename(func(tmp string) error {
		if !crashing.Load() {
			return nil
		}
		tmpSeen = tmp
		data, _ := os.ReadFile(tmp)
		if !bytes.Contains(data, []byte("sess-new")) {
			t.Errorf("temp file lacks the new record: %s", data)
		}
		return crash
	}))
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Put(conv(chanA), rec("sess-old"))
	flush(t, s)
	before, _ := os.ReadFile(s.Path())

	crashing.Store(true)
	_ = s.Put(conv(chanA), rec("sess-new"))
	if err := s.Flush(context.Background()); !errors.Is(err, crash) {
		t.Fatalf("write error = %v, want the injected crash", err)
	}
	after, _ := os.ReadFile(s.Path())
	if !bytes.Equal(before, after) {
		t.Fatalf("store file changed by an interrupted write:\n%s", after)
	}
	if _, err := os.Stat(tmpSeen); !os.IsNotExist(err) {
		t.Errorf("temp file %s left behind: %v", tmpSeen, err)
	}
	_ = s.Close()

	s2 := mustOpen(t, dir)
	if got, _ := s2.Get(conv(chanA), scope); got.SessionID != "sess-old" {
		t.Fatalf("after crash, session = %q, want sess-old", got.SessionID)
	}
}

func TestStrayTempFileFromCrashIsIgnoredAndCleanedOnOpen(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir)
	_ = s.Put(conv(chanA), rec("sess-old"))
	_ = s.Close()
	stray := filepath.Join(dir, atomicfile.TempPrefix(s.Path())+"123456")
	if err := os.WriteFile(stray, []byte(`{"version":1,"agentPubkey":"`+testPK+`","sess`), 0o600); err != nil {
		t.Fatal(err)
	}

	s2 := mustOpen(t, dir)
	if got, _ := s2.Get(conv(chanA), scope); got.SessionID != "sess-old" {
		t.Fatalf("session = %q, want sess-old", got.SessionID)
	}
	if _, err := os.Stat(stray); !os.IsNotExist(err) {
		t.Fatalf("stray temp file not removed: %v", err)
	}
}

func TestTouchBatchesWritesAndCloseFlushesThem(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir)
	_ = s.Put(conv(chanA), rec("sess-a"))
	t0 := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

	lastUsedOnDisk := func() time.Time {
		if err := s.file.Wait(context.Background(), s.marked); err != nil { // what Touch asked for, no more
			t.Fatal(err)
		}
		data, _ := os.ReadFile(s.Path())
		m, err := decode(data, testPK)
		if err != nil {
			t.Fatal(err)
		}
		return m[chanA].LastUsedAt
	}
	s.Touch(conv(chanA), t0) // first touch writes
	if got := lastUsedOnDisk(); !got.Equal(t0) {
		t.Fatalf("after first Touch disk has %v, want %v", got, t0)
	}
	s.Touch(conv(chanA), t0.Add(10*time.Second)) // within a minute: memory only
	if got := lastUsedOnDisk(); !got.Equal(t0) {
		t.Fatalf("Touch within a minute wrote the file (%v)", got)
	}
	if got, _ := s.Get(conv(chanA), scope); !got.LastUsedAt.Equal(t0.Add(10 * time.Second)) {
		t.Fatalf("in-memory LastUsedAt = %v", got.LastUsedAt)
	}
	s.Touch(conv(chanA), t0.Add(2*time.Minute)) // a minute later: written
	if got := lastUsedOnDisk(); !got.Equal(t0.Add(2 * time.Minute)) {
		t.Fatalf("Touch after a minute not written (%v)", got)
	}
	s.Touch(conv(chanA), t0.Add(2*time.Minute+time.Second))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got := lastUsedOnDisk(); !got.Equal(t0.Add(2*time.Minute + time.Second)) {
		t.Fatalf("Close did not flush the batched Touch (%v)", got)
	}
}

func TestTouchOfUnknownChannelDoesNothing(t *testing.T) {
	s := mustOpen(t, t.TempDir())
	s.Touch(conv(chanA), time.Now())
	flush(t, s)
	if s.Len() != 0 {
		t.Fatal("Touch created a record")
	}
	if _, err := os.Stat(s.Path()); !os.IsNotExist(err) {
		t.Fatal("Touch of unknown channel wrote the file")
	}
}

func TestPutFillsZeroTimes(t *testing.T) {
	s := mustOpen(t, t.TempDir())
	before := time.Now()
	if err := s.Put(conv(chanA), Record{SessionID: "s", RelayURL: relay, AgentCommand: agentCmd}); err != nil {
		t.Fatal(err)
	}
	got, _ := s.Get(conv(chanA), scope)
	if got.CreatedAt.Before(before) || !got.LastUsedAt.Equal(got.CreatedAt) {
		t.Fatalf("times not filled: %+v", got)
	}
}

func TestPutRejectsEmptySessionID(t *testing.T) {
	s := mustOpen(t, t.TempDir())
	if err := s.Put(conv(chanA), Record{}); err == nil {
		t.Fatal("Put with empty session id succeeded")
	}
}

func TestOpenRejectsPubkeyThatIsNotHex(t *testing.T) {
	for _, pk := range []string{"", "../../etc/passwd", strings.Repeat("A", 64), "abc"} {
		if s, err := Open(t.TempDir(), pk, nil); err == nil {
			_ = s.Close()
			t.Errorf("Open accepted pubkey %q", pk)
		}
	}
}

func TestConcurrentPutsAllLand(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ch := fmt.Sprintf("%08d-0000-4000-8000-000000000000", i)
			if err := s.Put(conv(ch), rec(fmt.Sprint("s", i))); err != nil {
				t.Error(err)
			}
			s.Touch(conv(ch), time.Now())
		}()
	}
	wg.Wait()
	_ = s.Close()
	if n := mustOpen(t, dir).Len(); n != 8 {
		t.Fatalf("after reopen Len = %d, want 8", n)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"version":1,"agentPubkey":"` + testPK + `","sessions":{"` + chanA + `":{"sessionId":"s","relayUrl":"ws://x","agentCommand":"goose","createdAt":"2025-01-01T00:00:00Z","lastUsedAt":"2025-01-01T00:00:00Z"}}}`))
	f.Add([]byte(`{"version":1,"agentPubkey":"` + testPK + `","sessions":null}`))
	f.Add([]byte(`{"` + chanA + `":"legacy"}`))
	f.Add([]byte(`{"version":1,"agentPubkey":"` + testPK + `","sessions":{"":{"sessionId":""}}}`))
	f.Add([]byte(`{"version":1,"agentPubkey":"` + testPK + `","sessions":{"a":{"createdAt":"nope"}}}`))
	f.Add([]byte("\x00\xff"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := decode(data, testPK)
		if err != nil {
			return
		}
		for ch, r := range m {
			if ch == "" || r.SessionID == "" {
				t.Fatalf("decode kept an empty key or session: %q %+v", ch, r)
			}
		}
		// Whatever decodes must survive a write + reload unchanged.
		out, err := json.Marshal(fileFormat{Version: FormatVersion, AgentPubkey: testPK, Sessions: m})
		if err != nil {
			return // e.g. a year outside RFC 3339; encode errors are reported by Put
		}
		m2, err := decode(out, testPK)
		if err != nil || len(m2) != len(m) {
			t.Fatalf("re-decode: %v (%d vs %d)", err, len(m2), len(m))
		}
	})
}

func BenchmarkPut(b *testing.B) {
	s, err := Open(b.TempDir(), testPK, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for i := range 50 { // a realistic store: tens of channels
		_ = s.Put(conv(fmt.Sprintf("%08d-0000-4000-8000-000000000000", i)), rec("s"))
	}
	for i := 0; b.Loop(); i++ {
		if err := s.Put(conv(chanA), rec(strconv.Itoa(i))); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkTouch(b *testing.B) {
	s, err := Open(b.TempDir(), testPK, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for i := range 50 {
		_ = s.Put(conv(fmt.Sprintf("%08d-0000-4000-8000-000000000000", i)), rec("s"))
	}
	_ = s.Put(conv(chanA), rec("s"))
	now := time.Now()
	for b.Loop() {
		now = now.Add(100 * time.Millisecond) // a turn every 100 ms: one write per 600 touches
		s.Touch(conv(chanA), now)
	}
}

func TestRemoveChannelForgetsAllItsConversationsAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir)
	_ = s.Put(conv(chanA), rec("sess-a"))
	_ = s.Put(conv(chanA+":root1"), rec("sess-a1"))
	_ = s.Put(conv(chanB+":root2"), rec("sess-b2"))
	s.RemoveChannel(chanA)
	_ = s.Close()
	s2 := mustOpen(t, dir)
	if _, ok := s2.Get(conv(chanA+":root1"), scope); ok || s2.Len() != 1 {
		t.Fatalf("after RemoveChannel and reopen: %d records, want only %s:root2", s2.Len(), chanB)
	}
	if _, ok := s2.Get(conv(chanB+":root2"), scope); !ok {
		t.Fatal("another channel's thread record was removed")
	}
}

// TestNoCallWaitsForABlockedDisk: with the file's writes stuck, Put, Remove, Touch and Get still
// return at once (the harness loop calls them), and the latest state lands once the disk frees.
func TestNoCallWaitsForABlockedDisk(t *testing.T) {
	dir := t.TempDir()
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	lg, _ := newLogger()
	s, err := Open(dir, testPK, lg, atomicfile.BeforeRename(func(string) error {
		once.Do(func() { close(entered); <-release })
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Put(conv(chanA), rec("sess-a"))
	<-entered
	for i := range 100 {
		_ = s.Put(conv(chanB), rec(fmt.Sprint("sess-b", i)))
		s.Touch(conv(chanB), time.Now())
		s.Remove(conv(chanA))
		if _, ok := s.Get(conv(chanB), scope); !ok {
			t.Fatal("Get lost a record while the disk was blocked")
		}
	}
	close(release)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := mustOpen(t, dir)
	if got, _ := s2.Get(conv(chanB), scope); got.SessionID != "sess-b99" || s2.Len() != 1 {
		t.Fatalf("after the disk freed: %d records, chanB = %q; want only sess-b99", s2.Len(), got.SessionID)
	}
}

func TestStandingDeliveredSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir)
	_ = s.Put(conv(chanA), rec("sess-a"))
	_ = s.Put(conv(chanB), rec("sess-b"))
	s.MarkStandingDelivered(conv(chanA), "sess-a")
	_ = s.Close()

	s2 := mustOpen(t, dir)
	if got, _ := s2.Get(conv(chanA), scope); !got.StandingDelivered {
		t.Fatalf("record %+v lost its standing-delivered mark", got)
	}
	if got, _ := s2.Get(conv(chanB), scope); got.StandingDelivered {
		t.Fatalf("unmarked record %+v reads as delivered", got)
	}
}

func TestStandingDeliveredMarkForReplacedSessionIsIgnored(t *testing.T) {
	s := mustOpen(t, t.TempDir())
	_ = s.Put(conv(chanA), rec("sess-new"))
	s.MarkStandingDelivered(conv(chanA), "sess-old") // a turn of the session that was replaced
	s.MarkStandingDelivered(conv(chanB), "sess-b")   // no record at all
	if got, _ := s.Get(conv(chanA), scope); got.StandingDelivered {
		t.Fatal("a mark for another session id marked the current one")
	}
	if s.Len() != 1 {
		t.Fatalf("Len = %d: a mark created a record", s.Len())
	}
}

func TestFileWithoutStandingFieldLoadsAsNotDelivered(t *testing.T) {
	dir := t.TempDir()
	// A file as written before the field existed.
	old := `{"version":1,"agentPubkey":"` + testPK + `","sessions":{"` + chanA + `":{"sessionId":"sess-a","relayUrl":"` + relay +
		`","agentCommand":"` + agentCmd + `","createdAt":"2025-01-02T03:04:05Z","lastUsedAt":"2025-01-02T03:04:05Z"}}}`
	if err := os.WriteFile(filepath.Join(dir, FileName(testPK)), []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	s := mustOpen(t, dir)
	got, ok := s.Get(conv(chanA), scope)
	if !ok || got != rec("sess-a") {
		t.Fatalf("Get = %+v, %v; want %+v", got, ok, rec("sess-a"))
	}
	// And an unmarked record is written without the field, as older readers expect.
	_ = s.Put(conv(chanB), rec("sess-b"))
	flush(t, s)
	if data, _ := os.ReadFile(s.Path()); bytes.Contains(data, []byte("standingDelivered")) {
		t.Fatalf("unmarked records carry the field: %s", data)
	}
}
