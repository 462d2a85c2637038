package chaos

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// maxUnexpectedExits ends the run: a worker that keeps dying on its own
// (a crash, a bad flag) is a finding, not something to restart forever.
const maxUnexpectedExits = 10

// proc is one start of a worker process in a slot.
type proc struct {
	slot, gen int
	name      string // "w<slot>.<gen>"
	cmd       *exec.Cmd
	done      chan struct{}
	killed    atomic.Bool // the harness SIGKILLed it
	deployed  atomic.Bool // the harness SIGTERMed it: a deploy
	failpoint atomic.Bool // it logged a failpoint kill
	paused    atomic.Bool // SIGSTOPped right now
	exitErr   error       // set before done closes
	last      []string    // its last log lines, for an unexpected exit
}

func (p *proc) alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// supervisor starts, kills, pauses and restarts the worker processes and
// feeds their log lines to the tally and the log file.
type supervisor struct {
	cfg   *Config
	env   []string
	tally *Tally
	logw  io.Writer // workers.log (serialised by logMu)
	logMu sync.Mutex
	rng   *rand.Rand // the killer's; used only by the killer goroutine

	mu         sync.Mutex
	procs      []*proc
	gens       []int
	started    int
	kills      int
	pauses     int
	unexpected []string
	health     []transition // the database health gate's transitions, as the harness read them
	stopping   bool
	wg         sync.WaitGroup

	fatalOnce sync.Once
	fatalErr  error
	fatal     chan struct{} // closed on the first fatal error

}

func newSupervisor(cfg *Config, env []string, tally *Tally, logw io.Writer) *supervisor {
	return &supervisor{cfg: cfg, env: env, tally: tally, logw: logw, procs: make([]*proc, cfg.Workers), gens: make([]int, cfg.Workers),
		rng: rand.New(rand.NewPCG(cfg.Seed, 0xc4a05)), fatal: make(chan struct{})}
}

// startAll starts every slot.
func (s *supervisor) startAll() error {
	for slot := range s.cfg.Workers {
		if err := s.start(slot); err != nil {
			return err
		}
	}
	return nil
}

// start starts the worker of slot (a new process, a new fault seed). It
// holds the lock across the start, so stop never misses a process.
func (s *supervisor) start(slot int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		return nil
	}
	s.gens[slot]++
	s.started++
	seed := s.cfg.Seed*1_000_003 + uint64(s.started)
	p := &proc{slot: slot, gen: s.gens[slot], name: fmt.Sprintf("w%d.%d", slot+1, s.gens[slot]), done: make(chan struct{})}
	cmd := exec.Command(s.cfg.Binary, s.cfg.workerArgs(seed)...)
	cmd.Env = s.env
	// Own process group: a Ctrl-C at the terminal reaches the harness, which
	// stops the workers itself. Pdeathsig: a killed harness leaves no worker.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return fmt.Errorf("chaos: worker %s: %w", p.name, err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("chaos: start worker %s: %w", p.name, err)
	}
	p.cmd = cmd
	s.procs[slot] = p
	s.logf(p, "harness: started pid %d (fault seed %d)", cmd.Process.Pid, seed)
	s.wg.Go(func() { s.read(p, stderr) })
	return nil
}

// read tallies p's log lines until the process is gone, then handles its
// exit.
func (s *supervisor) read(p *proc, r io.Reader) {
	br := bufio.NewReaderSize(r, 64*1024)
	for {
		line, err := br.ReadBytes('\n')
		if n := len(line); n > 0 {
			if line[n-1] == '\n' {
				line = line[:n-1]
			}
			l, ok := s.tally.Observe(line)
			if ok && l.Msg == msgFailpointKill {
				p.failpoint.Store(true)
			}
			if ok && (l.Msg == msgUnhealthy || l.Msg == msgHealthy || l.Msg == msgStarted) {
				s.mu.Lock()
				s.health = append(s.health, transition{proc: p.name, slot: p.slot, healthy: l.Msg == msgHealthy,
					started: l.Msg == msgStarted, at: time.Now()})
				s.mu.Unlock()
			}
			p.last = append(p.last, string(line))
			if len(p.last) > 5 {
				p.last = p.last[1:]
			}
			s.logMu.Lock()
			_, _ = fmt.Fprintf(s.logw, "%s %s\n", p.name, line)
			s.logMu.Unlock()
		}
		if err != nil {
			break
		}
	}
	p.exitErr = p.cmd.Wait()
	close(p.done)
	s.exited(p)
}

// flushLog writes out what the log file buffers, so workers.log can be
// followed while the run goes on.
func (s *supervisor) flushLog() {
	s.logMu.Lock()
	defer s.logMu.Unlock()
	if f, ok := s.logw.(interface{ Flush() error }); ok {
		_ = f.Flush()
	}
}

func (s *supervisor) logf(p *proc, format string, args ...any) {
	s.logMu.Lock()
	defer s.logMu.Unlock()
	_, _ = fmt.Fprintf(s.logw, "%s "+format+"\n", append([]any{p.name}, args...)...)
}

// exited classifies an exit and restarts the slot unless the run stops.
func (s *supervisor) exited(p *proc) {
	s.logf(p, "harness: exited: %v", p.exitErr)
	s.mu.Lock()
	if s.stopping {
		s.mu.Unlock()
		return
	}
	delay := time.Duration(0)
	if p.deployed.Load() && p.exitErr != nil {
		s.unexpected = append(s.unexpected, fmt.Sprintf("%s did not exit cleanly after SIGTERM (%v); last lines: %q", p.name, p.exitErr, p.last))
	}
	if !p.killed.Load() && !p.failpoint.Load() && !p.deployed.Load() {
		s.unexpected = append(s.unexpected, fmt.Sprintf("%s exited on its own (%v); last lines: %q", p.name, p.exitErr, p.last))
		delay = time.Second
		if len(s.unexpected) >= maxUnexpectedExits {
			last := s.unexpected[len(s.unexpected)-1]
			s.mu.Unlock()
			s.fail(fmt.Errorf("chaos: %d worker processes exited on their own; last: %s", maxUnexpectedExits, last))
			return
		}
	}
	s.mu.Unlock()
	time.Sleep(delay)
	if err := s.start(p.slot); err != nil {
		s.fail(err)
	}
}

// fail records the first fatal error and closes fatal.
func (s *supervisor) fail(err error) {
	s.fatalOnce.Do(func() {
		s.fatalErr = err
		close(s.fatal)
	})
}

// err returns the fatal error, if any.
func (s *supervisor) err() error {
	select {
	case <-s.fatal:
		return s.fatalErr
	default:
		return nil
	}
}

// pick returns a random live, running (not paused) process, or nil.
func (s *supervisor) pick() *proc {
	s.mu.Lock()
	defer s.mu.Unlock()
	var live []*proc
	for _, p := range s.procs {
		if p != nil && p.cmd != nil && p.alive() && !p.paused.Load() && !p.failpoint.Load() {
			live = append(live, p)
		}
	}
	if len(live) == 0 {
		return nil
	}
	return live[s.rng.IntN(len(live))]
}

// kill SIGKILLs a random running worker; the exit handler restarts it.
func (s *supervisor) kill() bool {
	p := s.pick()
	if p == nil {
		return false
	}
	p.killed.Store(true)
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return false
	}
	s.logf(p, "harness: SIGKILL")
	s.mu.Lock()
	s.kills++
	s.mu.Unlock()
	return true
}

// deploy replaces every worker as a rolling deploy does: one at a time,
// SIGTERM (the worker drains and stops), then a new process in its slot
// (the exit handler starts it) before the next. A slot whose process has
// just exited is waited for until its successor runs, and that one is
// replaced: every slot's worker is, so the window's deploy happens. It
// returns the processes it replaced, and stops early when ctx ends or the
// run stops.
func (s *supervisor) deploy(ctx context.Context) int {
	n := 0
	for slot := range s.cfg.Workers {
		p := s.running(ctx, slot)
		if p == nil {
			return n
		}
		p.deployed.Store(true)
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			continue
		}
		s.logf(p, "harness: SIGTERM (deploy)")
		select {
		case <-p.done:
		case <-ctx.Done():
			return n
		}
		n++
		// Its successor is starting (exited restarts the slot).
		for ctx.Err() == nil {
			s.mu.Lock()
			next := s.procs[slot]
			s.mu.Unlock()
			if next != nil && next != p {
				break
			}
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return n
}

// running returns slot's process once it is alive — a slot between an
// exit and its restart is waited for — or nil when ctx ends or the run
// stops (fatally or at its end).
func (s *supervisor) running(ctx context.Context, slot int) *proc {
	for {
		s.mu.Lock()
		p, stopping := s.procs[slot], s.stopping
		s.mu.Unlock()
		if stopping {
			return nil
		}
		if p != nil && p.cmd != nil && p.alive() {
			return p
		}
		select {
		case <-ctx.Done():
			return nil
		case <-s.fatal:
			return nil
		case <-time.After(50 * time.Millisecond): // the exit handler's restart, polled as deploy polls for it
		}
	}
}

// pause SIGSTOPs a random running worker for d, then SIGCONTs it. It
// returns at once; done closes when the worker runs again.
func (s *supervisor) pause(ctx context.Context, d time.Duration) (done <-chan struct{}, ok bool) {
	p := s.pick()
	if p == nil {
		return nil, false
	}
	p.paused.Store(true)
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		p.paused.Store(false)
		return nil, false
	}
	s.logf(p, "harness: SIGSTOP for %s", d)
	s.mu.Lock()
	s.pauses++
	s.mu.Unlock()
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		select {
		case <-ctx.Done():
		case <-time.After(d):
		case <-p.done:
		}
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		p.paused.Store(false)
		s.logf(p, "harness: SIGCONT")
	}()
	return ch, true
}

// chaos kills a random worker every KillEveryMin..KillEveryMax until at
// least Kills kills and Pauses pauses happened (or ctx ends). A pause is
// chosen instead of a kill in proportion to what is left of each, one
// pause at a time.
func (s *supervisor) chaos(ctx context.Context) {
	var pausing <-chan struct{}
	pauseLen := s.cfg.Visibility + 2*time.Second
	for {
		s.mu.Lock()
		kills, pauses := s.kills, s.pauses
		s.mu.Unlock()
		paused := pausing != nil
		if paused {
			select {
			case <-pausing:
				pausing, paused = nil, false
			default:
			}
		}
		if kills >= s.cfg.Kills && pauses >= s.cfg.Pauses && !paused {
			return
		}
		span := s.cfg.KillEveryMax - s.cfg.KillEveryMin
		wait := s.cfg.KillEveryMin + time.Duration(s.rng.Int64N(int64(span)+1))
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		// Interleave: a pause with the share of pauses still to do, so
		// pauses happen while the stream flows, not after it drained.
		leftK, leftP := max(0, s.cfg.Kills-kills), max(0, s.cfg.Pauses-pauses)
		wantPause := leftP > 0 && !paused && s.rng.Float64()*float64(leftK+leftP) < float64(leftP)
		switch {
		case wantPause:
			if ch, ok := s.pause(ctx, pauseLen); ok {
				pausing = ch
			}
		case kills < s.cfg.Kills:
			s.kill()
		}
	}
}

// counts returns processes started, harness kills, pauses and the
// unexpected exits so far.
func (s *supervisor) counts() (started, kills, pauses int, unexpected []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.started, s.kills, s.pauses, append([]string(nil), s.unexpected...)
}

// transitions returns the health transitions the workers logged so far.
func (s *supervisor) transitions() []transition {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]transition(nil), s.health...)
}

// stop ends every worker: SIGCONT (in case it is paused), SIGTERM, and
// SIGKILL after grace. It reports workers that did not exit cleanly.
func (s *supervisor) stop(grace time.Duration) []string {
	s.mu.Lock()
	s.stopping = true
	procs := append([]*proc(nil), s.procs...)
	s.mu.Unlock()
	for _, p := range procs {
		if p != nil && p.cmd != nil && p.alive() {
			_ = p.cmd.Process.Signal(syscall.SIGCONT)
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	var problems []string
	deadline := time.After(grace)
	for _, p := range procs {
		if p == nil || p.cmd == nil {
			continue
		}
		select {
		case <-p.done:
		case <-deadline:
		}
		if p.alive() {
			_ = p.cmd.Process.Signal(syscall.SIGKILL)
			<-p.done
			problems = append(problems, fmt.Sprintf("%s did not stop within %s of SIGTERM (killed)", p.name, grace))
			continue
		}
		if p.exitErr != nil && !p.killed.Load() && !p.failpoint.Load() {
			var ee *exec.ExitError
			if errors.As(p.exitErr, &ee) {
				problems = append(problems, fmt.Sprintf("%s exited with %s after SIGTERM; last lines: %q", p.name, ee.String(), p.last))
			}
		}
	}
	s.wg.Wait()
	return problems
}
