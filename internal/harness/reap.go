package harness

import (
	"encoding/json"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/buzz-harness/buzz/internal/atomicfile"
)

// Agents run in their own process groups, so they outlive a harness that is SIGKILLed, and an
// orphan may still post its reply after the next harness has decided to prompt the batch again.
// The harness therefore records its agents' process groups in the state dir, and a new harness
// (which holds the store lock, so the old one is gone) kills what is left before replaying the
// journal.

type agentProc struct {
	PID       int    `json:"pid"`
	StartTime uint64 `json:"startTime"` // from /proc/<pid>/stat, so a reused pid is never killed
}

// agentsFile is where the agents' process groups are recorded, one file per agent key.
func agentsFile(stateDir, agent string) string {
	return filepath.Join(stateDir, "agents-"+agent+".json")
}

// agentRecord keeps the agents file in step with the live agent processes. The loop puts and
// drops processes (memory only); the file is written by its own writer, never on the loop.
type agentRecord struct {
	path  string
	log   *slog.Logger
	file  *atomicfile.Snapshots
	mu    sync.Mutex
	procs map[int]agentProc // by slot
}

func newAgentRecord(path string, log *slog.Logger, opts ...atomicfile.Option) *agentRecord {
	r := &agentRecord{path: path, log: log, procs: map[int]agentProc{}}
	r.file = atomicfile.NewSnapshots(path, 0o600, r.snapshot, opts...)
	return r
}

func (r *agentRecord) snapshot() ([]byte, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	procs := make([]agentProc, 0, len(r.procs))
	for _, slot := range slices.Sorted(maps.Keys(r.procs)) {
		procs = append(procs, r.procs[slot])
	}
	raw, _ := json.Marshal(procs)
	return raw, true
}

// put records slot's live process.
func (r *agentRecord) put(slot int, a agentProc) {
	r.mu.Lock()
	r.procs[slot] = a
	r.mu.Unlock()
	r.file.Mark()
}

// drop forgets slot's process (killed; a later record shows it gone).
func (r *agentRecord) drop(slot int) {
	r.mu.Lock()
	_, had := r.procs[slot]
	delete(r.procs, slot)
	r.mu.Unlock()
	if had {
		r.file.Mark()
	}
}

// close writes what is pending and stops the writer.
func (r *agentRecord) close() {
	if err := r.file.Close(); err != nil {
		r.log.Warn("cannot record agent processes", "err", err)
	}
}

// reapOrphans kills the process groups of agents a previous harness left running and says how
// many had something still running (only then may a reply be in flight: the caller waits for it).
func (p *pool) reapOrphans() (killed int) {
	raw, err := os.ReadFile(p.record.path)
	if err != nil {
		return 0
	}
	var procs []agentProc
	if json.Unmarshal(raw, &procs) != nil {
		p.log.Warn("ignoring unreadable agent process record", "path", p.record.path)
		return 0
	}
	for _, a := range procs {
		st, ok := readProcStat(a.PID)
		if !ok || st.start != a.StartTime {
			continue
		}
		// A zombie leader is dead already (its parent, the killed harness, never reaped it), but
		// what it started may still run in its group: only a live member is "left running".
		switch {
		case !st.zombie:
			p.log.Warn("killing agent left running by a previous buzz-acp", "pid", a.PID)
		case groupAlive(a.PID):
			p.log.Warn("killing what an agent of a previous buzz-acp left running in its process group; the agent itself had exited", "pid", a.PID)
		default:
			p.log.Debug("agent of a previous buzz-acp had already exited, with nothing left in its process group", "pid", a.PID)
			continue
		}
		_ = syscall.Kill(-a.PID, syscall.SIGKILL)
		killed++
	}
	return killed
}

// groupAlive reports whether a process of group pgid runs (is not a zombie). When /proc cannot
// be listed it says yes: the group is killed, which is harmless if it was empty.
func groupAlive(pgid int) bool {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return true
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := readProcStat(pid); ok && st.pgrp == pgid && !st.zombie {
			return true
		}
	}
	return false
}

// procStartTime reads a process's start time (clock ticks since boot).
func procStartTime(pid int) (uint64, bool) {
	st, ok := readProcStat(pid)
	return st.start, ok
}

type procStat struct {
	start  uint64 // clock ticks since boot
	zombie bool   // exited, not yet reaped
	pgrp   int    // process group
}

// readProcStat reads what /proc/<pid>/stat says of a process's start and state.
func readProcStat(pid int) (procStat, bool) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, false
	}
	s := string(raw)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procStat{}, false
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3 (state), f[2] field 5 (pgrp); starttime is field 22
	if len(f) < 20 {
		return procStat{}, false
	}
	n, err := strconv.ParseUint(f[19], 10, 64)
	pg, perr := strconv.Atoi(f[2])
	return procStat{start: n, zombie: f[0] == "Z", pgrp: pg}, err == nil && perr == nil
}
