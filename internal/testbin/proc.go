package testbin

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/buzz-harness/buzz/internal/testwait"
)

// Linux /proc helpers for tests that follow the processes the binaries start (agents run in their
// own process groups, so they are not the test's children).

// stat is the part of /proc/<pid>/stat the tests need.
type stat struct {
	state      string // R, S, Z, …
	ppid, pgrp int
	cpu        time.Duration // user + system time so far
}

// alive: the process has not exited (a zombie has).
func (s stat) alive() bool { return s.state != "Z" && s.state != "X" }

func readStat(pid int) (stat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return stat{}, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // the command name may contain spaces and parentheses
	if i < 0 {
		return stat{}, false
	}
	f := strings.Fields(s[i+1:]) // state, ppid, pgrp, … utime and stime are the 12th and 13th
	if len(f) < 13 {
		return stat{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	pgrp, _ := strconv.Atoi(f[2])
	utime, _ := strconv.Atoi(f[11])
	stime, _ := strconv.Atoi(f[12])
	const tick = 10 * time.Millisecond // USER_HZ is 100 on every Linux we run on
	return stat{state: f[0], ppid: ppid, pgrp: pgrp, cpu: time.Duration(utime+stime) * tick}, true
}

// eachProc calls fn for every process /proc lists.
func eachProc(fn func(pid int, st stat)) {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := readStat(pid); ok {
			fn(pid, st)
		}
	}
}

// Children lists the pids whose parent is pid.
func Children(pid int) []int {
	var out []int
	eachProc(func(p int, st stat) {
		if st.ppid == pid {
			out = append(out, p)
		}
	})
	return out
}

// Running reports whether pid exists and has not exited (a zombie has).
func Running(pid int) bool {
	st, ok := readStat(pid)
	return ok && st.alive()
}

// groupRunning reports whether any process of process group pgid is still running.
func groupRunning(pgid int) bool {
	alive := false
	eachProc(func(_ int, st stat) {
		if st.pgrp == pgid && st.alive() {
			alive = true
		}
	})
	return alive
}

// KillWithAgents SIGKILLs pid's process group and the groups of pid's children, and returns once
// none of the children's processes runs (failing the test after 10 s). buzz-acp starts each agent
// in a group of its own, so killing buzz-acp's group alone leaves them running, and writing into
// the test's temp dirs. pid's group is stopped first so it cannot start another child meanwhile.
// pid itself is the caller's to reap.
func KillWithAgents(t testing.TB, pid int) {
	t.Helper()
	_ = syscall.Kill(-pid, syscall.SIGSTOP)
	kids := Children(pid)
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	for _, k := range kids {
		_ = syscall.Kill(-k, syscall.SIGKILL)
	}
	// The killed groups' processes are not the test's children: there is nothing to wait on but
	// /proc.
	testwait.Eventually(t, 10*time.Second, func() bool {
		return !slices.ContainsFunc(kids, groupRunning)
	}, fmt.Sprintf("the process groups %v of killed pid %d to end", kids, pid))
}

// CPUTime is the CPU time pid has used so far (user and system, 10 ms steps); 0 if it is gone.
func CPUTime(pid int) time.Duration {
	st, _ := readStat(pid)
	return st.cpu
}

// RSSKiB is pid's resident memory (VmRSS) in KiB; 0 if it is gone.
func RSSKiB(pid int) int {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			if f := strings.Fields(v); len(f) > 0 {
				n, _ := strconv.Atoi(f[0])
				return n
			}
		}
	}
	return 0
}

// TreeRSSKiB is the resident memory of pid and every process descended from it (buzz-acp and
// its agents, with whatever they started), in KiB. Pages two processes share count twice.
func TreeRSSKiB(pid int) int {
	children := map[int][]int{}
	eachProc(func(p int, st stat) {
		if st.alive() {
			children[st.ppid] = append(children[st.ppid], p)
		}
	})
	total := 0
	for todo := []int{pid}; len(todo) > 0; {
		p := todo[len(todo)-1]
		todo = append(todo[:len(todo)-1], children[p]...)
		total += RSSKiB(p)
	}
	return total
}
