package journal

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/buzz-harness/buzz/internal/atomicfile"
	"github.com/buzz-harness/buzz/internal/testbin"
)

const (
	testPK = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	chanA  = "11111111-1111-4111-8111-111111111111"
)

func openT(t *testing.T, dir string, hooks func(*Journal)) (*Journal, *testbin.Output) {
	t.Helper()
	lb := &testbin.Output{}
	j, err := open(dir, testPK, slog.New(slog.NewTextHandler(lb, nil)), hooks)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = j.Close() })
	return j, lb
}

func entry(n int) Entry {
	id := fmt.Sprintf("%064x", n)
	ev := fmt.Sprintf(`{"id":"%s","kind":9,"created_at":%d,"content":"hi <b> & ünïcode %d","tags":[["h","%s"]],"sig":"00"}`, id, 1700000000+n, n, chanA)
	return Entry{ChannelID: chanA, Event: json.RawMessage(ev), EventID: id, CreatedAt: int64(1700000000 + n),
		AcceptedAt: time.Date(2025, 1, 1, 0, 0, n, 0, time.UTC)}
}

func ids(es []Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.EventID[60:]
	}
	return out
}

func mustAppend(t *testing.T, j *Journal, ns ...int) {
	t.Helper()
	for _, n := range ns {
		if err := j.Append(entry(n)); err != nil {
			t.Fatalf("Append(%d): %v", n, err)
		}
	}
}

func TestPendingEntriesSurviveReopenInAcceptOrder(t *testing.T) {
	dir := t.TempDir()
	j, _ := openT(t, dir, nil)
	mustAppend(t, j, 3, 1, 2)
	_ = j.Close()

	j2, logs := openT(t, dir, nil)
	got := j2.Pending()
	if fmt.Sprint(ids(got)) != "[0003 0001 0002]" {
		t.Fatalf("pending = %v", ids(got))
	}
	want := entry(3)
	if got[0].ChannelID != want.ChannelID || got[0].CreatedAt != want.CreatedAt ||
		!got[0].AcceptedAt.Equal(want.AcceptedAt) || !bytes.Equal(got[0].Event, want.Event) {
		t.Fatalf("entry changed across reopen:\n got %+v\nwant %+v", got[0], want)
	}
	if w := logs.Lines("level=WARN"); len(w) != 0 {
		t.Fatalf("clean reopen warned: %q", w)
	}
}

func TestDoneEntriesAreGoneAfterReopen(t *testing.T) {
	dir := t.TempDir()
	j, _ := openT(t, dir, nil)
	mustAppend(t, j, 1, 2, 3)
	if err := j.Done(entry(2).EventID, "unknown-id"); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(ids(j.Pending())) != "[0001 0003]" {
		t.Fatalf("pending before reopen = %v", ids(j.Pending()))
	}
	_ = j.Close()
	j2, _ := openT(t, dir, nil)
	if fmt.Sprint(ids(j2.Pending())) != "[0001 0003]" {
		t.Fatalf("pending after reopen = %v", ids(j2.Pending()))
	}
}

func TestAppendOfPendingEventIsNoop(t *testing.T) {
	j, _ := openT(t, t.TempDir(), nil)
	mustAppend(t, j, 1)
	size := j.size
	mustAppend(t, j, 1)
	if j.Len() != 1 || j.size != size {
		t.Fatalf("duplicate append: Len=%d size %d→%d", j.Len(), size, j.size)
	}
}

func TestAppendRejectsEntryWithoutIDOrValidEvent(t *testing.T) {
	j, _ := openT(t, t.TempDir(), nil)
	e := entry(1)
	e.EventID = ""
	if err := j.Append(e); err == nil {
		t.Error("empty id accepted")
	}
	e = entry(1)
	e.Event = json.RawMessage(`{"id":`)
	if err := j.Append(e); err == nil {
		t.Error("invalid JSON event accepted")
	}
	if j.Len() != 0 {
		t.Fatal("rejected entries became pending")
	}
}

func TestTornLastRecordIsSkippedWithWarningAndLaterAppendsSurvive(t *testing.T) {
	dir := t.TempDir()
	j, _ := openT(t, dir, nil)
	mustAppend(t, j, 1, 2)
	_ = j.Close()
	// Simulate a crash mid-write: the last record lost its tail.
	data, _ := os.ReadFile(j.Path())
	if err := os.WriteFile(j.Path(), data[:len(data)-20], 0o600); err != nil {
		t.Fatal(err)
	}

	j2, logs := openT(t, dir, nil)
	if fmt.Sprint(ids(j2.Pending())) != "[0001]" {
		t.Fatalf("pending = %v, want only the whole record", ids(j2.Pending()))
	}
	if w := logs.Lines("level=WARN"); len(w) != 1 || !strings.Contains(w[0], "torn") {
		t.Fatalf("want one torn-record warning, got %q", w)
	}
	mustAppend(t, j2, 3)
	_ = j2.Close()
	j3, logs3 := openT(t, dir, nil)
	if fmt.Sprint(ids(j3.Pending())) != "[0001 0003]" || len(logs3.Lines("level=WARN")) != 0 {
		t.Fatalf("after append past torn tail: pending %v, warnings %q", ids(j3.Pending()), logs3.Lines("level=WARN"))
	}
}

func TestGarbageFileStartsEmptyWithWarningAndIsReplaced(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, FileName(testPK))
	garbage := []byte("not a journal\n\x00\x01\x02\n{\"op\":\"accept\"}\nlast line without newline")
	if err := os.WriteFile(path, garbage, 0o600); err != nil {
		t.Fatal(err)
	}
	j, logs := openT(t, dir, nil)
	if j.Len() != 0 {
		t.Fatalf("Len = %d", j.Len())
	}
	w := logs.Lines("level=WARN")
	if len(w) != 2 || !strings.Contains(strings.Join(w, "\n"), "count=3") {
		t.Fatalf("want a torn warning and one summary of 3 bad records, got %q", w)
	}
	if data, _ := os.ReadFile(path); len(data) != 0 {
		t.Fatalf("garbage not compacted away: %q", data)
	}
}

func TestRecordWithBadChecksumIsSkippedAndOthersKept(t *testing.T) {
	dir := t.TempDir()
	j, _ := openT(t, dir, nil)
	mustAppend(t, j, 1, 2, 3)
	_ = j.Close()
	data, _ := os.ReadFile(j.Path())
	lines := bytes.SplitAfter(data, []byte("\n"))
	lines[1] = bytes.Replace(lines[1], []byte("ünïcode"), []byte("unicode"), 1) // bit rot in record 2
	_ = os.WriteFile(j.Path(), bytes.Join(lines, nil), 0o600)

	j2, logs := openT(t, dir, nil)
	if fmt.Sprint(ids(j2.Pending())) != "[0001 0003]" {
		t.Fatalf("pending = %v", ids(j2.Pending()))
	}
	if w := logs.Lines("level=WARN"); len(w) != 1 || !strings.Contains(w[0], "checksum mismatch") {
		t.Fatalf("warnings = %q", w)
	}
}

func TestOpenCompactsAwayDoneEntries(t *testing.T) {
	dir := t.TempDir()
	j, _ := openT(t, dir, nil)
	mustAppend(t, j, 1, 2, 3)
	_ = j.Done(entry(1).EventID, entry(2).EventID)
	_ = j.SetWatermark(1700000003)
	_ = j.Close()
	before, _ := os.ReadFile(j.Path())

	j2, _ := openT(t, dir, nil)
	after, _ := os.ReadFile(j2.Path())
	// The watermark, two recent tombstones (kept so a replay is recognised) and one pending entry.
	if n := bytes.Count(after, []byte("\n")); n != 4 || len(after) >= len(before) {
		t.Fatalf("compacted file has %d records (%d→%d bytes):\n%s", n, len(before), len(after), after)
	}
	if j2.Watermark() != 1700000003 || fmt.Sprint(ids(j2.Pending())) != "[0003]" {
		t.Fatalf("state lost by compaction: wm=%d pending=%v", j2.Watermark(), ids(j2.Pending()))
	}
}

func TestDoneCompactsOnceFileExceedsThreshold(t *testing.T) {
	j, _ := openT(t, t.TempDir(), func(j *Journal) { j.compactThreshold = 4 << 10 })
	for i := range 40 {
		mustAppend(t, j, i)
		if err := j.Done(entry(i).EventID); err != nil {
			t.Fatal(err)
		}
	}
	mustAppend(t, j, 0x99)
	if err := j.SettleCompaction(); err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(j.Path())
	if st.Size() > 8<<10 {
		t.Fatalf("journal grew to %d bytes despite a 4 KiB threshold", st.Size())
	}
	if fmt.Sprint(ids(j.Pending())) != "[0099]" {
		t.Fatalf("pending = %v", ids(j.Pending()))
	}
}

func TestWatermarkPersistsAndNeverMovesBack(t *testing.T) {
	dir := t.TempDir()
	j, _ := openT(t, dir, nil)
	if j.Watermark() != 0 {
		t.Fatal("fresh watermark not 0")
	}
	_ = j.SetWatermark(200)
	_ = j.SetWatermark(100)
	if j.Watermark() != 200 {
		t.Fatalf("watermark = %d, want 200", j.Watermark())
	}
	_ = j.Close()
	j2, _ := openT(t, dir, nil)
	if j2.Watermark() != 200 {
		t.Fatalf("after reopen watermark = %d", j2.Watermark())
	}
}

// faultyFile wraps the real append file and fails on demand.
type faultyFile struct {
	appendFile
	mu                   sync.Mutex
	failWrite, failSync  bool
	failTruncate         bool
	partialWriteFraction int // when failing a write, first write len/fraction bytes (0: none)
}

var errDisk = errors.New("injected disk error")

func (f *faultyFile) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failWrite {
		n := 0
		if f.partialWriteFraction > 0 {
			n, _ = f.appendFile.Write(p[:len(p)/f.partialWriteFraction])
		}
		return n, errDisk
	}
	return f.appendFile.Write(p)
}

func (f *faultyFile) Sync() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failSync {
		return errDisk
	}
	return f.appendFile.Sync()
}

func (f *faultyFile) Truncate(n int64) error {
	if f.failTruncate {
		return errDisk
	}
	return f.appendFile.Truncate(n)
}

func withFaultyFile(ff **faultyFile) func(*Journal) {
	return func(j *Journal) {
		j.openAppend = func(path string) (appendFile, error) {
			real, err := openAppendFile(path)
			if err != nil {
				return nil, err
			}
			*ff = &faultyFile{appendFile: real.(*os.File)}
			return *ff, nil
		}
	}
}

func TestAppendReturnsErrorOnPartialWriteAndLeavesNoTornRecord(t *testing.T) {
	dir := t.TempDir()
	var ff *faultyFile
	j, _ := openT(t, dir, withFaultyFile(&ff))
	mustAppend(t, j, 1)
	ff.failWrite, ff.partialWriteFraction = true, 2
	if err := j.Append(entry(2)); !errors.Is(err, errDisk) {
		t.Fatalf("Append err = %v, want the disk error", err)
	}
	if j.Len() != 1 {
		t.Fatal("failed append became pending")
	}
	ff.failWrite = false
	mustAppend(t, j, 3)
	_ = j.Close()
	j2, logs := openT(t, dir, nil)
	if fmt.Sprint(ids(j2.Pending())) != "[0001 0003]" || len(logs.Lines("level=WARN")) != 0 {
		t.Fatalf("pending %v warnings %q", ids(j2.Pending()), logs.Lines("level=WARN"))
	}
}

// A failed background fsync is not an error of the Append that wrote the record (it already
// returned), so the file is treated as suspect: the next write rewrites it, and nothing written
// is lost.
func TestFailedFsyncMakesTheNextWriteRewriteTheFile(t *testing.T) {
	dir := t.TempDir()
	var ff *faultyFile
	synced := make(chan error, 10)
	j, logs := openT(t, dir, func(j *Journal) {
		withFaultyFile(&ff)(j)
		j.afterSync = func(err error) { synced <- err }
	})
	first := ff
	ff.mu.Lock()
	ff.failSync = true
	ff.mu.Unlock()
	mustAppend(t, j, 1)
	if err := <-synced; !errors.Is(err, errDisk) {
		t.Fatalf("syncer err = %v, want the disk error", err)
	}
	if len(logs.Lines("fsync failed")) != 1 {
		t.Fatalf("no warning for the failed fsync: %q", logs.Lines("level=WARN"))
	}
	mustAppend(t, j, 2)
	if ff == first {
		t.Fatal("the write after a failed fsync did not rewrite the file")
	}
	_ = j.Close()
	j2, _ := openT(t, dir, nil)
	if fmt.Sprint(ids(j2.Pending())) != "[0001 0002]" {
		t.Fatalf("pending %v", ids(j2.Pending()))
	}
}

func TestFailedRollbackIsRepairedByRewriteBeforeNextAppend(t *testing.T) {
	dir := t.TempDir()
	var ff *faultyFile
	j, _ := openT(t, dir, withFaultyFile(&ff))
	mustAppend(t, j, 1)
	ff.failWrite, ff.failTruncate, ff.partialWriteFraction = true, true, 3
	if err := j.Append(entry(2)); err == nil {
		t.Fatal("Append succeeded")
	}
	// The next append goes through a fresh file (compaction reopens via the hook).
	mustAppend(t, j, 3)
	_ = j.Close()
	j2, logs := openT(t, dir, nil)
	if fmt.Sprint(ids(j2.Pending())) != "[0001 0003]" || len(logs.Lines("level=WARN")) != 0 {
		t.Fatalf("pending %v warnings %q", ids(j2.Pending()), logs.Lines("level=WARN"))
	}
}

func TestDoneWriteFailureForgetsInMemoryAndPersistsOnNextWrite(t *testing.T) {
	dir := t.TempDir()
	var ff *faultyFile
	j, _ := openT(t, dir, withFaultyFile(&ff))
	mustAppend(t, j, 1, 2)
	ff.failWrite = true
	if err := j.Done(entry(1).EventID); err == nil {
		t.Fatal("Done reported success on a failed write")
	}
	if fmt.Sprint(ids(j.Pending())) != "[0002]" {
		t.Fatalf("pending = %v", ids(j.Pending()))
	}
	ff.failWrite = false
	mustAppend(t, j, 3)
	_ = j.Close()
	j2, _ := openT(t, dir, nil)
	if fmt.Sprint(ids(j2.Pending())) != "[0002 0003]" {
		t.Fatalf("after reopen pending = %v (done record lost)", ids(j2.Pending()))
	}
}

func TestCompactionInterruptedBeforeRenameKeepsOldJournal(t *testing.T) {
	dir := t.TempDir()
	crash := errors.New("crash")
	j, _ := openT(t, dir, nil)
	mustAppend(t, j, 1, 2)
	j.writeOpts = []atomicfile.Option{atomicfile.BeforeRename(func(string) error { return crash })}
	_ = j.Done(entry(1).EventID)
	if err := j.Compact(); !errors.Is(err, crash) {
		t.Fatalf("Compact err = %v", err)
	}
	_ = j.Close()
	j2, _ := openT(t, dir, nil)
	if fmt.Sprint(ids(j2.Pending())) != "[0002]" {
		t.Fatalf("pending = %v", ids(j2.Pending()))
	}
}

func TestSecondOpenFailsNamingHolderPid(t *testing.T) {
	dir := t.TempDir()
	j, _ := openT(t, dir, nil)
	_, err := Open(dir, testPK, nil)
	want := fmt.Sprintf("journal %s is locked by pid %d", j.Path(), os.Getpid())
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("err = %v, want prefix %q", err, want)
	}
}

func TestOpenFailsClearlyWhenStateDirIsAFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f")
	_ = os.WriteFile(file, nil, 0o600)
	_, err := Open(filepath.Join(file, "state"), testPK, nil)
	if err == nil || !strings.Contains(err.Error(), "create state dir") {
		t.Fatalf("err = %v", err)
	}
}

func TestOperationsAfterCloseFail(t *testing.T) {
	j, _ := openT(t, t.TempDir(), nil)
	_ = j.Close()
	if err := j.Append(entry(1)); err == nil {
		t.Fatal("Append after Close succeeded")
	}
}

func TestConcurrentAppendsAndDonesAllPersist(t *testing.T) {
	dir := t.TempDir()
	j, _ := openT(t, dir, func(j *Journal) { j.compactThreshold = 2 << 10 })
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				n := w*100 + i
				if err := j.Append(entry(n)); err != nil {
					t.Error(err)
				}
				if i%2 == 0 {
					if err := j.Done(entry(n).EventID); err != nil {
						t.Error(err)
					}
				}
			}
		}()
	}
	wg.Wait()
	_ = j.Close()
	j2, logs := openT(t, dir, nil)
	if j2.Len() != 40 || len(logs.Lines("level=WARN")) != 0 {
		t.Fatalf("Len = %d (want 40), warnings %q", j2.Len(), logs.Lines("level=WARN"))
	}
}

func FuzzReplay(f *testing.F) {
	var seed bytes.Buffer
	for _, r := range []record{
		{Op: opWatermark, TS: 5},
		{Op: opAccept, Entry: &Entry{EventID: "a", Event: json.RawMessage(`{}`)}},
		{Op: opAccept, Entry: &Entry{EventID: "b", Event: json.RawMessage(`{"x":[1,2]}`)}},
		{Op: opDone, IDs: []string{"a"}},
	} {
		line, _ := encodeLine(r)
		seed.Write(line)
	}
	f.Add(seed.Bytes())
	f.Add(seed.Bytes()[:seed.Len()-7])
	f.Add([]byte("00000000 {}\n"))
	f.Add([]byte("zzzzzzzz {\"op\":\"done\"}\n\n\n"))
	f.Add([]byte{0xff, '\n', 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		st, _ := replay(data)
		// Whatever replays must compact and replay to the same pending set and watermark.
		var buf bytes.Buffer
		if st.watermark > 0 {
			line, _ := encodeLine(record{Op: opWatermark, TS: st.watermark})
			buf.Write(line)
		}
		list := st.list()
		for i := range list {
			line, err := encodeLine(record{Op: opAccept, Entry: &list[i]})
			if err != nil {
				t.Fatalf("encode replayed entry: %v", err)
			}
			buf.Write(line)
		}
		st2, stats := replay(buf.Bytes())
		if stats.bad != 0 || stats.torn {
			t.Fatalf("compacted journal does not replay cleanly: %+v", stats)
		}
		if len(st2.pending) != len(st.pending) || st2.watermark != st.watermark {
			t.Fatalf("state changed: %d/%d pending, wm %d/%d", len(st2.pending), len(st.pending), st2.watermark, st.watermark)
		}
	})
}

func BenchmarkAppendDone(b *testing.B) {
	j, err := Open(b.TempDir(), testPK, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	e := entry(1)
	for i := 0; b.Loop(); i++ {
		e.EventID = fmt.Sprintf("%064x", i)
		if err := j.Append(e); err != nil {
			b.Fatal(err)
		}
		if err := j.Done(e.EventID); err != nil {
			b.Fatal(err)
		}
	}
}

func TestHandledRemembersRecentlyFinishedEventsAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	j, _ := openT(t, dir, nil)
	mustAppend(t, j, 1, 2)
	_ = j.Done(entry(1).EventID)
	skipped := "00000000000000000000000000000000000000000000000000000000000000ff"
	if err := j.Skip(skipped, 1700000002); err != nil {
		t.Fatal(err)
	}
	_ = j.Close()
	j2, _ := openT(t, dir, nil)
	for _, id := range []string{entry(1).EventID, entry(2).EventID, skipped} {
		if !j2.Handled(id) {
			t.Errorf("%s… not handled after reopen", id[:8])
		}
	}
	if j2.Handled(entry(9).EventID) {
		t.Error("an unseen event counts as handled")
	}
	if j2.Watermark() < 1700000002 {
		t.Errorf("watermark %d not raised by accepted and skipped events", j2.Watermark())
	}
}

func TestFinishedEventsOutsideRecentWindowAreForgotten(t *testing.T) {
	dir := t.TempDir()
	j, _ := openT(t, dir, nil)
	old := "00000000000000000000000000000000000000000000000000000000000000aa"
	_ = j.Skip(old, 1700000000)
	_ = j.SetWatermark(1700000000 + RecentWindow + 10)
	_ = j.Compact()
	_ = j.Close()
	j2, _ := openT(t, dir, nil)
	if j2.Handled(old) {
		t.Fatal("a finished event far behind the watermark was kept")
	}
}

func TestInFlightMarkSurvivesReopenAndCompaction(t *testing.T) {
	dir := t.TempDir()
	j, _ := openT(t, dir, nil)
	mustAppend(t, j, 1, 2)
	at := time.Unix(1700000100, 0)
	if err := j.InFlight(at, true, entry(1).EventID); err != nil {
		t.Fatal(err)
	}
	_ = j.Compact()
	_ = j.Close()
	j2, _ := openT(t, dir, nil)
	p := j2.Pending()
	if len(p) != 2 || !p[0].InFlightAt.Equal(at) || !p[0].InFlightOwnSecond || !p[1].InFlightAt.IsZero() || p[1].InFlightOwnSecond {
		t.Fatalf("pending after reopen = %+v", p)
	}
}

func TestDecidedOutcomeSurvivesReopenAndCompactionUntilTheBatchGoesInFlightAgain(t *testing.T) {
	dir := t.TempDir()
	j, _ := openT(t, dir, nil)
	mustAppend(t, j, 1, 2)
	at := time.Unix(1700000100, 0)
	if err := j.InFlight(at, true, entry(1).EventID); err != nil {
		t.Fatal(err)
	}
	reply := json.RawMessage(`{"id":"ab","kind":9,"content":"the agent's answer"}`)
	if err := j.Outcome(reply, entry(1).EventID); err != nil {
		t.Fatal(err)
	}
	if err := j.Outcome(json.RawMessage(`{not json`), entry(1).EventID); err == nil {
		t.Fatal("an outcome that is not JSON was recorded")
	}
	_ = j.Compact()
	_ = j.Close()
	j2, _ := openT(t, dir, nil)
	p := j2.Pending()
	if len(p) != 2 || string(p[0].Outcome) != string(reply) || p[1].Outcome != nil {
		t.Fatalf("pending after reopen = %+v", p)
	}
	if err := j2.InFlight(at.Add(time.Minute), true, entry(1).EventID); err != nil {
		t.Fatal(err)
	}
	if p := j2.Pending(); p[0].Outcome != nil {
		t.Fatal("a new turn of the batch kept the previous turn's decision")
	}
}

func TestFutureDatedEventCannotPushTheWatermarkPastTheClock(t *testing.T) {
	j, _ := openT(t, t.TempDir(), nil)
	e := entry(1)
	e.CreatedAt = time.Now().Add(365 * 24 * time.Hour).Unix()
	if err := j.Append(e); err != nil {
		t.Fatal(err)
	}
	if w := j.Watermark(); w > time.Now().Unix()+maxFuture {
		t.Fatalf("watermark %d is %d s ahead of the clock", w, w-time.Now().Unix())
	}
}

func TestInFlightNeverCompactsOnTheWayToAPrompt(t *testing.T) {
	j, _ := openT(t, t.TempDir(), func(j *Journal) { j.compactThreshold = 1 })
	mustAppend(t, j, 1, 2, 3)
	before, err := os.Stat(j.Path())
	if err != nil {
		t.Fatal(err)
	}
	if err := j.InFlight(time.Unix(1700000100, 0), false, entry(1).EventID); err != nil {
		t.Fatal(err)
	}
	after, err := os.Stat(j.Path())
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(before, after) || after.Size() <= before.Size() {
		t.Fatal("InFlight rewrote the journal instead of appending to it")
	}
	if err := j.Done(entry(2).EventID); err != nil {
		t.Fatal(err)
	}
	if err := j.SettleCompaction(); err != nil {
		t.Fatal(err)
	}
	if done, _ := os.Stat(j.Path()); os.SameFile(after, done) {
		t.Fatal("Done past the threshold did not compact")
	}
}

// No write waits for the disk: Append, Skip, InFlight and Done return while an fsync is still
// running, and the syncer's next fsync covers every record written meanwhile (group commit).
// Close fsyncs what is left.
func TestWritesDoNotWaitForTheDiskAndOneFsyncCoversThoseWrittenMeanwhile(t *testing.T) {
	inSync := make(chan struct{}, 10)
	release := make(chan struct{})
	dir := t.TempDir()
	j, _ := openT(t, dir, func(j *Journal) {
		j.openAppend = func(path string) (appendFile, error) {
			f, err := openAppendFile(path)
			return &gatedFile{f, inSync, release}, err
		}
	})
	mustAppend(t, j, 1)
	<-inSync // the syncer's fsync of record 1 has not returned
	mustAppend(t, j, 2)
	if err := j.Skip(entry(3).EventID, entry(3).CreatedAt); err != nil {
		t.Fatal(err)
	}
	if err := j.InFlight(time.Unix(1700000001, 0), false, entry(1).EventID); err != nil {
		t.Fatal(err)
	}
	if err := j.Done(entry(1).EventID); err != nil {
		t.Fatal(err)
	}
	release <- struct{}{}
	<-inSync // one fsync for the four records written during the first
	release <- struct{}{}
	close(release)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if n := len(inSync); n != 1 {
		t.Fatalf("%d fsyncs after the second, want 1 (Close's own)", n)
	}
	j2, _ := openT(t, dir, nil)
	if got := fmt.Sprint(ids(j2.Pending())); got != "[0002]" {
		t.Fatalf("after reopen pending %s, want [0002]", got)
	}
}

// gatedFile's Sync announces itself and waits until released.
type gatedFile struct {
	appendFile
	inSync  chan<- struct{}
	release <-chan struct{}
}

func (g *gatedFile) Sync() error {
	g.inSync <- struct{}{}
	<-g.release
	return g.appendFile.Sync()
}

// A busy agent keeps more than minDonePrune finished ids inside the recent window; prune must not
// scan them all on every finished turn, and must still forget the old ones.
func TestFinishedIDsStayBoundedAndArePrunedOncePerDoubling(t *testing.T) {
	s := newState()
	const perSecond, events = 20, 20000 // the window holds 2,400 finished ids
	scans := 0
	for i := range events {
		id := fmt.Sprintf("%064x", i)
		ts := int64(1700000000 + i/perSecond)
		s.apply(record{Op: opAccept, Entry: &Entry{EventID: id, CreatedAt: ts}})
		before := s.donePruneAt
		s.apply(record{Op: opDone, IDs: []string{id}, TS: ts})
		if s.donePruneAt != before {
			scans++
		}
		if limit := 2*RecentWindow*perSecond + minDonePrune + perSecond; len(s.done) > limit {
			t.Fatalf("after %d events %d finished ids remembered, want at most %d", i+1, len(s.done), limit)
		}
	}
	if scans > events/1000 {
		t.Errorf("prune scanned the finished ids %d times over %d events", scans, events)
	}
	if _, ok := s.done[fmt.Sprintf("%064x", 0)]; ok {
		t.Error("the first finished id, far behind the watermark, is still remembered")
	}
}

// A compaction's rewrite runs on the syncer, off every caller: while its new file is stuck on
// the disk, Append, Done and InFlight return at once, and what they wrote meanwhile is in the
// compacted journal (and survives a reopen).
func TestBackgroundCompactionBlocksNoWriterAndKeepsWhatWasWrittenMeanwhile(t *testing.T) {
	dir := t.TempDir()
	entered, release := make(chan struct{}), make(chan struct{})
	var armed, once = make(chan struct{}), sync.Once{}
	j, _ := openT(t, dir, func(j *Journal) {
		j.compactThreshold = 1
		j.writeOpts = []atomicfile.Option{atomicfile.BeforeRename(func(string) error {
			select {
			case <-armed:
				once.Do(func() { close(entered); <-release })
			default: // Open's own compaction
			}
			return nil
		})}
	})
	close(armed)
	mustAppend(t, j, 1, 2, 3)
	if err := j.Done(entry(1).EventID); err != nil { // past the threshold: asks for a compaction
		t.Fatal(err)
	}
	<-entered // the rewrite is stuck before its rename
	mustAppend(t, j, 4)
	if err := j.Done(entry(2).EventID); err != nil {
		t.Fatal(err)
	}
	if err := j.InFlight(time.Unix(1700000100, 0), true, entry(3).EventID); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := j.SettleCompaction(); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(ids(j.Pending())); got != "[0003 0004]" {
		t.Fatalf("pending %s after the compaction, want [0003 0004]", got)
	}
	_ = j.Close()
	j2, _ := openT(t, dir, nil)
	p := j2.Pending()
	if got := fmt.Sprint(ids(p)); got != "[0003 0004]" || p[0].InFlightAt.IsZero() || !p[0].InFlightOwnSecond {
		t.Fatalf("after reopen pending %s (in flight %v), want [0003 0004] with 0003 in flight", got, p[0].InFlightAt)
	}
}
