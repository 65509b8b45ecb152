// Command bench-peers measures the Buzz relay side by side with khatru on SQLite and a
// verify-only WebSocket server in one run, and prints medians and ratios. `make bench-peers`
// builds the three binaries and runs it; see docs/benchmarks.md, section Peers.
//
//	bench-peers -ours BIN -khatru BIN -bare BIN [-runs 3] [-ingest-events 3000] ...
//
// Every run starts each relay as a fresh process with an empty data directory, in rotating
// order, and measures ingest with 1 and 4 publishers, then fan-out to the subscribers.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/buzz-harness/buzz/bench/peers/load"
)

type peer struct {
	name string
	bin  string
	args func(dir string) []string
	auth bool
	// pg, when set, runs two nodes of bin on this PostgreSQL database (a fresh schema per run):
	// events are published to node A and the fan-out subscribers listen on node B.
	pg string
}

type sample struct {
	ingest1, ingest4 float64 // events/s
	p50, p99         time.Duration
}

func main() {
	ours := flag.String("ours", "", "buzz-relay binary (required)")
	khatru := flag.String("khatru", "", "khatru-sqlite binary (required)")
	bare := flag.String("bare", "", "bare-relay binary (required)")
	runs := flag.Int("runs", 3, "runs per relay; the table shows medians")
	ingestEvents := flag.Int("ingest-events", 3000, "events per ingest measurement")
	fanOutEvents := flag.Int("fanout-events", 150, "measured fan-out events (each to every subscriber)")
	subscribers := flag.Int("subscribers", 100, "fan-out subscribers")
	window := flag.Int("window", 256, "unanswered EVENTs allowed per publisher connection")
	pg := flag.String("pg", "", "also measure buzz-relay as two nodes on this PostgreSQL database (postgres://…)")
	flag.Parse()
	if *ours == "" || *khatru == "" || *bare == "" {
		fmt.Fprintln(os.Stderr, "bench-peers: -ours, -khatru and -bare are required (use `make bench-peers`)")
		os.Exit(2)
	}
	// Ours runs without its per-pubkey write cap (a defence, 200 events/s by default): one key
	// publishes the whole ingest load here, and the peers have no such cap.
	oursArgs := func(dir string) []string {
		return []string{"--addr", "127.0.0.1:0", "--data-dir", dir, "--max-writes-per-sec", "0"}
	}
	peers := []peer{
		{name: "buzz-relay", bin: *ours, auth: true, args: oursArgs},
		{name: "khatru+sqlite", bin: *khatru, auth: true, args: func(dir string) []string { return []string{"-addr", "127.0.0.1:0", "-db", dir + "/khatru.db"} }},
		{name: "verify-only", bin: *bare, args: func(string) []string { return []string{"-addr", "127.0.0.1:0"} }},
	}
	if *pg != "" {
		peers = append(peers, peer{name: "buzz-relay pg A→B", bin: *ours, auth: true, pg: *pg, args: oursArgs})
	}
	if err := run(peers, *runs, load.Options{IngestEvents: *ingestEvents, FanOutEvents: *fanOutEvents, Subscribers: *subscribers}, *window); err != nil {
		fmt.Fprintf(os.Stderr, "bench-peers: %v\n", err)
		os.Exit(1)
	}
}

func run(peers []peer, runs int, o load.Options, window int) error {
	fmt.Printf("bench-peers %s, %s, GOMAXPROCS=%d, load average at start: %s\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), runtime.Version(), runtime.GOMAXPROCS(0), loadavg())
	fmt.Printf("ingest: %d signed kind-9 events, ≤%d in flight per connection; fan-out: %d events to %d subscribers, closed loop\n\n",
		o.IngestEvents, window, o.FanOutEvents, o.Subscribers)
	w, err := load.Prepare(o)
	if err != nil {
		return err
	}
	results := make([][]sample, len(peers))
	for r := range runs {
		for k := range peers {
			i := (k + r) % len(peers) // rotate the order so no relay always runs first
			s, err := measure(peers[i], w, window)
			if err != nil {
				return fmt.Errorf("run %d, %s: %w", r+1, peers[i].name, err)
			}
			results[i] = append(results[i], s)
			fmt.Printf("run %d %-14s ingest@1 %7.0f ev/s  ingest@4 %7.0f ev/s  fan-out p50 %6.2f ms  p99 %6.2f ms\n",
				r+1, peers[i].name, s.ingest1, s.ingest4, ms(s.p50), ms(s.p99))
		}
	}
	med := make([]sample, len(peers))
	for i, rs := range results {
		med[i] = sample{
			ingest1: median(rs, func(s sample) float64 { return s.ingest1 }),
			ingest4: median(rs, func(s sample) float64 { return s.ingest4 }),
			p50:     time.Duration(median(rs, func(s sample) float64 { return float64(s.p50) })),
			p99:     time.Duration(median(rs, func(s sample) float64 { return float64(s.p99) })),
		}
	}
	fmt.Printf("\nmedians of %d runs (load average now: %s)\n\n", runs, loadavg())
	fmt.Println("| relay | ingest@1 (ev/s) | ingest@4 (ev/s) | fan-out p50 (ms) | fan-out p99 (ms) |")
	fmt.Println("|---|---|---|---|---|")
	for i, p := range peers {
		fmt.Printf("| %s | %.0f | %.0f | %.2f | %.2f |\n", p.name, med[i].ingest1, med[i].ingest4, ms(med[i].p50), ms(med[i].p99))
	}
	fmt.Println()
	fmt.Println("| ratio | ingest@1 | ingest@4 | fan-out p99 |")
	fmt.Println("|---|---|---|---|")
	ratio := func(a, b int) {
		fmt.Printf("| %s / %s | %.2f | %.2f | %.2f |\n", peers[a].name, peers[b].name,
			med[a].ingest1/med[b].ingest1, med[a].ingest4/med[b].ingest4, float64(med[a].p99)/float64(med[b].p99))
	}
	for i := 1; i < len(peers); i++ {
		if peers[i].pg == "" {
			ratio(0, i)
		}
	}
	for i, p := range peers {
		if p.pg != "" { // two PostgreSQL nodes against the same peers
			for j := 1; j < len(peers); j++ {
				if peers[j].pg == "" {
					ratio(i, j)
				}
			}
		}
	}
	fmt.Println("\n(ingest: higher is better, so a ratio < 1 means ours is slower; fan-out p99: lower is better, so > 1 means ours is slower)")
	return nil
}

func measure(p peer, w *load.Workload, window int) (sample, error) {
	dir, err := os.MkdirTemp("", "bench-peers-")
	if err != nil {
		return sample{}, err
	}
	defer os.RemoveAll(dir)
	var t load.Target
	if p.pg != "" {
		urlA, urlB, stop, err := startPair(p, dir)
		if err != nil {
			return sample{}, err
		}
		defer stop()
		t = load.Target{URL: urlA, SubURL: urlB, Auth: true}
	} else {
		url, stop, err := start(p, p.args(dir), dir)
		if err != nil {
			return sample{}, err
		}
		defer stop()
		t = load.Target{URL: url, Auth: p.auth}
	}
	ctx := context.Background()
	if err := load.Setup(ctx, t, w); err != nil {
		return sample{}, err
	}
	var s sample
	if s.ingest1, err = load.Ingest(ctx, t, w.Ingest1, window); err != nil {
		return s, fmt.Errorf("ingest@1: %w", err)
	}
	if s.ingest4, err = load.Ingest(ctx, t, w.Ingest4, window); err != nil {
		return s, fmt.Errorf("ingest@4: %w", err)
	}
	f, err := load.FanOut(ctx, t, w)
	if err != nil {
		return s, fmt.Errorf("fan-out: %w", err)
	}
	s.p50, s.p99 = f.P50, f.P99
	return s, nil
}

var listening = regexp.MustCompile(`listening on (ws://\S+)`)

// start runs the relay binary and waits for its "listening on ws://ADDR" line on stderr.
func start(p peer, args []string, dir string) (string, func(), error) {
	cmd := exec.Command(p.bin, args...)
	cmd.Dir = dir
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return "", nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", nil, fmt.Errorf("start %s: %w", p.bin, err)
	}
	stop := func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	}
	lines := bufio.NewScanner(stderr)
	var tail []string
	for lines.Scan() {
		if m := listening.FindStringSubmatch(lines.Text()); m != nil {
			go io.Copy(io.Discard, stderr) // keep draining so the relay never blocks on logging
			return m[1], stop, nil
		}
		tail = append(tail, lines.Text())
	}
	stop()
	return "", nil, fmt.Errorf("%s exited before listening: %s", p.name, strings.Join(tail, " | "))
}

func median(rs []sample, f func(sample) float64) float64 {
	vs := make([]float64, len(rs))
	for i, r := range rs {
		vs[i] = f(r)
	}
	slices.Sort(vs)
	return vs[len(vs)/2]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
