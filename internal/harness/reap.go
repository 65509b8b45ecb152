package harness

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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

// recordAgents writes the live agents' process groups.
func (p *pool) recordAgents() {
	var procs []agentProc
	for _, s := range p.slots {
		if s.proc == nil {
			continue
		}
		if st, ok := procStartTime(s.proc.Pid()); ok {
			procs = append(procs, agentProc{PID: s.proc.Pid(), StartTime: st})
		}
	}
	raw, _ := json.Marshal(procs)
	if err := atomicfile.WriteFile(p.record, raw, 0o600); err != nil {
		p.log.Warn("cannot record agent processes", "err", err)
	}
}

// reapOrphans kills the process groups of agents a previous harness left running and says how
// many it killed.
func (p *pool) reapOrphans() (killed int) {
	raw, err := os.ReadFile(p.record)
	if err != nil {
		return 0
	}
	var procs []agentProc
	if json.Unmarshal(raw, &procs) != nil {
		p.log.Warn("ignoring unreadable agent process record", "path", p.record)
		return 0
	}
	for _, a := range procs {
		if st, ok := procStartTime(a.PID); ok && st == a.StartTime {
			p.log.Warn("killing agent left running by a previous buzz-acp", "pid", a.PID)
			_ = syscall.Kill(-a.PID, syscall.SIGKILL)
			killed++
		}
	}
	return killed
}

// procStartTime reads a process's start time (clock ticks since boot).
func procStartTime(pid int) (uint64, bool) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	s := string(raw)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3 (state); starttime is field 22
	if len(f) < 20 {
		return 0, false
	}
	n, err := strconv.ParseUint(f[19], 10, 64)
	return n, err == nil
}
