package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker/daemon"
	"github.com/ddbworker/ddbworker/internal/dev/caseapp"
	"github.com/ddbworker/ddbworker/internal/dev/devcmd"
	"github.com/ddbworker/ddbworker/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// runbookLine is one `$ ddbworker …` command line of a fenced block.
type runbookLine struct {
	line    int    // in the file, 1-based
	text    string // after "$ ddbworker "
	section string // the "## " heading it is under
}

// runbookLines extracts the fenced `$ ddbworker …` command lines of a
// Markdown file.
func runbookLines(t *testing.T, path string) []runbookLine {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var out []runbookLine
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	fenced, section := false, ""
	for n := 1; sc.Scan(); n++ {
		l := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(l, "```"):
			fenced = !fenced
		case !fenced && strings.HasPrefix(l, "## "):
			section = strings.TrimPrefix(l, "## ")
		case fenced && strings.HasPrefix(l, "$ ddbworker "):
			out = append(out, runbookLine{line: n, text: strings.TrimPrefix(l, "$ ddbworker "), section: section})
		}
	}
	require.NoError(t, sc.Err())
	return out
}

// readmeBlock extracts the `ddbworker …` lines of the fenced blocks under
// heading (up to the next heading).
func readmeBlock(t *testing.T, path, heading string) []runbookLine {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var out []runbookLine
	in, fenced := false, false
	for n, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(l, "```"):
			fenced = !fenced
		case !fenced && strings.HasPrefix(l, "#"):
			in = l == heading
		case in && fenced && strings.HasPrefix(l, "ddbworker "):
			out = append(out, runbookLine{line: n + 1, text: strings.TrimPrefix(l, "ddbworker "), section: "README " + heading})
		}
	}
	return out
}

// shellWords splits a command line as a POSIX shell does for the forms the
// runbooks use: words, '…' and "…" quoting, and $VAR / "$VAR" expanded from
// vars (an unknown variable fails the test: the runbook uses a name the
// test does not provide).
func shellWords(t *testing.T, s string, vars map[string]string) []string {
	t.Helper()
	var words []string
	var cur strings.Builder
	inWord := false
	expand := func(i int) int { // s[i] == '$'
		j := i + 1
		for j < len(s) && (s[j] == '_' || s[j] >= 'A' && s[j] <= 'Z' || s[j] >= '0' && s[j] <= '9') {
			j++
		}
		v, ok := vars[s[i+1:j]]
		require.True(t, ok, "the runbook uses $%s, which the test does not provide", s[i+1:j])
		cur.WriteString(v)
		return j
	}
	for i := 0; i < len(s); {
		switch c := s[i]; {
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
			i++
		case c == '#' && !inWord:
			i = len(s) // a comment
		case c == '\'':
			end := strings.IndexByte(s[i+1:], '\'')
			require.GreaterOrEqual(t, end, 0, "unterminated ' in %q", s)
			cur.WriteString(s[i+1 : i+1+end])
			inWord, i = true, i+end+2
		case c == '"':
			inWord = true
			for i++; i < len(s) && s[i] != '"'; {
				if s[i] == '$' {
					i = expand(i)
					continue
				}
				cur.WriteByte(s[i])
				i++
			}
			require.Less(t, i, len(s), "unterminated \" in %q", s)
			i++
		case c == '$':
			inWord = true
			i = expand(i)
		default:
			inWord = true
			cur.WriteByte(c)
			i++
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// longRunning reports whether a command line starts a process that runs
// until it is stopped: a worker, a sweeper with --every.
func longRunning(args []string) bool {
	return args[0] == "run" || slices.Contains(args, "--every")
}

// TestRunbookCommands runs every `$ ddbworker …` command line of
// docs/runbooks.md, then the README's "Operating it, more" block, through
// the command tree, against the emulators, in the
// setup its appendix describes — `tables create --index-processing`,
// `queues create --max-receive-count 3`, a worker, `send --count 1000
// --poison 24 --seed 42` (the seed decides the keys the runbooks name) —
// and requires each to exit 0, and each worker or `--every` sweeper to
// keep running until the test stops it (then to exit 0). What the test
// substitutes, and only that: the table (DDBWORKER_TABLE) and queue names
// are the test's own; $QUEUE_URL, $DLQ_URL and their DDBWORKER_ forms are
// its queues; --metrics-addr listens on a free port; the SQS message ids
// and the one key of another session the runbooks name are resolved to
// records of the same kind in this run. Old behaviour: runbook 2 said a
// handler's terminal failure "fails the same way again, even after the
// data is fixed … Stop here", and nothing ran its commands (its appendix's
// `tables create` then `run --index-processing` is refused today).
func TestRunbookCommands(t *testing.T) {
	testenv.AWSConfig(t)
	for _, kv := range os.Environ() { // no stray DDBWORKER_* values
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "DDBWORKER_") {
			t.Setenv(k, "")
			require.NoError(t, os.Unsetenv(k))
		}
	}
	table, queue := testenv.Unique("runbook"), testenv.Unique("runbook")
	t.Setenv("DDBWORKER_TABLE", table)
	cfg := testenv.AWSConfig(t)
	t.Cleanup(func() {
		_, _ = dynamodb.NewFromConfig(cfg).DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	vars := map[string]string{}

	lines := runbookLines(t, "../../../../docs/runbooks.md")
	require.Greater(t, len(lines), 30, "the runbooks' command lines")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type background struct {
		line runbookLine
		done chan error
	}
	var running []background
	var mu sync.Mutex
	exec := func(l runbookLine, args []string) (string, error) {
		// The binary the runbooks run: the example service with the
		// development tools (send; the hidden fault flags), as main builds it.
		app := caseapp.App("", "")
		app.Extension = devcmd.Extension()
		root := daemon.Command(app)
		var out, errw bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&errw)
		root.SetArgs(args)
		cctx, stop := context.WithCancel(ctx)
		if !longRunning(args) { // a worker runs until the test stops it
			cctx, stop = context.WithTimeout(ctx, 2*time.Minute)
		}
		defer stop()
		err := root.ExecuteContext(cctx)
		if err != nil {
			err = fmt.Errorf("%w\nstdout:\n%s\nstderr:\n%s", err, out.String(), errw.String())
		}
		return out.String(), err
	}
	// resolve names the runbooks took from their own session.
	rejectionOf := func(code string) string {
		out, err := exec(runbookLine{}, []string{"inbox", "list", "--status", "FAILED_TERMINAL", "--code", code, "--all", "-o", "json"})
		require.NoError(t, err)
		var doc struct {
			Records []struct {
				SQSMessageID string `json:"sqsMessageId"`
				Rejection    bool   `json:"rejection"`
			} `json:"records"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &doc))
		for _, r := range doc.Records {
			if r.Rejection {
				return r.SQSMessageID
			}
		}
		t.Fatalf("no rejection of code %s in this run", code)
		return ""
	}
	otherSession := map[string]func() string{
		// runbook 3's hash-mismatch rejection, runbook 2's CaseArchived one
		"rejected:a672f5d7-77e9-4328-8560-27e1b3eb1484": func() string { return "rejected:" + rejectionOf("IDEMPOTENCY_HASH_MISMATCH") },
		"rejected:1049af01-58ce-430e-a35b-266647d37872": func() string { return "rejected:" + rejectionOf("UNKNOWN_MESSAGE_TYPE") },
		// runbook 4's crashed work came from another send: a key of this one
		"deadline-8abdf7de-000003": func() string { return "deadline-909335e9-000265" },
	}
	run := func(l runbookLine) {
		t.Helper()
		args := shellWords(t, l.text, vars)
		for i, a := range args {
			if resolve, ok := otherSession[a]; ok {
				args[i] = resolve()
			}
			if a == "--metrics-addr" && i+1 < len(args) {
				args[i+1] = "127.0.0.1:0"
			}
		}
		if args[0] == "queues" && args[1] == "create" {
			args = append(args, "--queue", queue)
		}
		if longRunning(args) {
			done := make(chan error, 1)
			go func() {
				_, err := exec(l, args)
				done <- err
			}()
			select { // it keeps running: a worker that gives up does so at once
			case err := <-done:
				t.Fatalf("line %d (%s): `ddbworker %s` must keep running; it exited: %v", l.line, l.section, l.text, err)
			case <-time.After(2 * time.Second):
			}
			mu.Lock()
			running = append(running, background{line: l, done: done})
			mu.Unlock()
			return
		}
		out, err := exec(l, args)
		require.NoError(t, err, "line %d (%s): `ddbworker %s` exits 0", l.line, l.section, l.text)
		if args[0] == "queues" && args[1] == "create" {
			for _, kv := range strings.Fields(out) {
				if k, v, ok := strings.Cut(kv, "="); ok {
					vars[k] = v
				}
			}
			vars["QUEUE_URL"], vars["DLQ_URL"] = vars["DDBWORKER_QUEUE_URL"], vars["DDBWORKER_DLQ_URL"]
			require.NotEmpty(t, vars["QUEUE_URL"], out)
			t.Cleanup(func() {
				c := sqs.NewFromConfig(cfg)
				for _, u := range []string{vars["QUEUE_URL"], vars["DLQ_URL"]} {
					_, _ = c.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: aws.String(u)})
				}
			})
		}
	}

	// The appendix's setup first, as the session did.
	var setup, rest []runbookLine
	for _, l := range lines {
		if strings.HasPrefix(l.section, "Appendix") {
			setup = append(setup, l)
		} else {
			rest = append(rest, l)
		}
	}
	require.Len(t, setup, 4, "tables create, queues create, run, send")
	for _, l := range setup {
		run(l)
	}
	require.Eventually(t, func() bool { return testenv.InspectQueue(t, vars["DLQ_URL"]).Total() >= 26 }, 2*time.Minute, time.Second,
		"the send's 26 DLQ messages, as runbook 2 counts them")
	for _, l := range rest {
		run(l)
	}

	// The README's reopen/redrive/discard block, KEY a work item that
	// failed for good in this run (the CASE_NOT_FOUND work the runbook
	// reopened and redrove fails again: the test fixed no data).
	var key string
	require.Eventually(t, func() bool {
		out, err := exec(runbookLine{}, []string{"inbox", "list", "--status", "FAILED_TERMINAL", "--code", "CASE_NOT_FOUND", "--all", "-o", "json"})
		require.NoError(t, err)
		var doc struct {
			Records []struct {
				Key       string `json:"key"`
				Rejection bool   `json:"rejection"`
			} `json:"records"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &doc))
		for _, r := range doc.Records {
			if !r.Rejection {
				key = r.Key
				return true
			}
		}
		return false
	}, time.Minute, time.Second, "a FAILED_TERMINAL work item for the README's KEY")
	readme := readmeBlock(t, "../../../../README.md", "### Operating it, more")
	require.NotEmpty(t, readme)
	for _, l := range readme {
		l.text = strings.ReplaceAll(l.text, "KEY", key)
		run(l)
	}

	cancel()
	for _, b := range running {
		select {
		case err := <-b.done:
			require.NoError(t, err, "line %d: `ddbworker %s` stops cleanly", b.line.line, b.line.text)
		case <-time.After(time.Minute):
			t.Fatalf("line %d: `ddbworker %s` did not stop", b.line.line, b.line.text)
		}
	}
	t.Logf("ran %d runbook command lines (%d of them long-running) and %d of the README's", len(lines), len(running), len(readme))
}

// The extraction finds what a reader sees: fenced `$ ddbworker` lines only,
// quoting and variables as the shell reads them.
func TestRunbookLineParsing(t *testing.T) {
	vars := map[string]string{"DLQ_URL": "http://q/dlq"}
	require.Equal(t, []string{"dlq", "redrive", "--dlq-url", "http://q/dlq", "--filter", "code=(none: redrive policy)", "--reason", "a b"},
		shellWords(t, `dlq redrive --dlq-url "$DLQ_URL" --filter 'code=(none: redrive policy)' --reason "a b"  # comment`, vars))
	require.True(t, longRunning([]string{"sweep", "--every", "1m"}))
	require.False(t, longRunning([]string{"sweep", "--dry-run"}))
	require.Regexp(t, regexp.MustCompile(`^inbox reopen --code CASE_NOT_FOUND`), func() string {
		for _, l := range runbookLines(t, "../../../../docs/runbooks.md") {
			if strings.HasPrefix(l.text, "inbox reopen") {
				return l.text
			}
		}
		return ""
	}(), "runbook 2 reopens in bulk")
}
