package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/daemon"
	"github.com/ddbworker/ddbworker/effects"
	"github.com/ddbworker/ddbworker/internal/daemonext"
	"github.com/ddbworker/ddbworker/internal/dev/caseapp"
	"github.com/ddbworker/ddbworker/internal/dev/devcmd"
	"github.com/ddbworker/ddbworker/internal/invoices"
	"github.com/ddbworker/ddbworker/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// runbookLine is one `$ ddbworker …` (or `$ ddbworker-dev …`, `$
// invoice-worker …`) command line of a fenced block of a document.
type runbookLine struct {
	file    string // the document, as the test reads it
	line    int    // in the file, 1-based
	prog    string // "ddbworker", "ddbworker-dev", or "invoice-worker" (the README's service)
	text    string // after "$ <prog> ", continuation lines joined
	section string // the "## " heading it is under
	exit    int    // the exit status the document shows ("(exit N)", or `echo $?`'s answer); 0 if it shows none
}

// docProgs are the programs whose command lines the documents show and
// the test runs.
var docProgs = []string{"ddbworker", "ddbworker-dev", "invoice-worker"}

// assignment is a `$ NAME="…"` or `$ export NAME=…` line: a variable later
// lines of the same document use.
var assignment = regexp.MustCompile(`^(?:export\s+)?([A-Z_][A-Z0-9_]*)=(.*)$`)

// exitShown is the line a document prints after a command that failed.
var exitShown = regexp.MustCompile(`^\(exit (\d+)\)$`)

// testVars are the variables the test provides (its own queues); a
// document's assignment of one is not taken, nor of a DDBWORKER_ one.
var testVars = map[string]bool{"QUEUE_URL": true, "DLQ_URL": true}

// runbookLines extracts the fenced `$ ddbworker …`, `$ ddbworker-dev …`
// and `$ invoice-worker …` command lines of a Markdown file, each with the exit status the file
// shows for it, and puts the variables its `$ NAME=…` lines assign in vars
// (if not nil).
func runbookLines(t *testing.T, path string, vars map[string]string) []runbookLine {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	lines := strings.Split(string(b), "\n")
	var out []runbookLine
	fenced, section := false, ""
	last := -1 // the index in out of the fence's last command, for its exit status
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		switch {
		case strings.HasPrefix(l, "```"):
			fenced, last = !fenced, -1
		case !fenced && strings.HasPrefix(l, "## "):
			section = strings.TrimPrefix(l, "## ")
		case fenced && l == "$ echo $?" && last >= 0 && i+1 < len(lines):
			n, err := strconv.Atoi(strings.TrimSpace(lines[i+1]))
			require.NoError(t, err, "%s:%d: `echo $?` answers a number", path, i+2)
			out[last].exit, last = n, -1
			i++
		case fenced && exitShown.MatchString(l) && last >= 0:
			out[last].exit, _ = strconv.Atoi(exitShown.FindStringSubmatch(l)[1])
		case fenced && strings.HasPrefix(l, "$ "):
			cmd, n := strings.TrimPrefix(l, "$ "), i+1
			for strings.HasSuffix(cmd, `\`) && i+1 < len(lines) { // a continued line
				i++
				cmd = strings.TrimSpace(strings.TrimSuffix(cmd, `\`)) + " " + strings.TrimSpace(lines[i])
			}
			last = -1
			if m := assignment.FindStringSubmatch(cmd); m != nil {
				if vars != nil && !testVars[m[1]] && !strings.HasPrefix(m[1], "DDBWORKER_") {
					vars[m[1]] = strings.Trim(m[2], `"'`)
				}
				continue
			}
			for _, prog := range docProgs {
				if rest, ok := strings.CutPrefix(cmd, prog+" "); ok {
					out = append(out, runbookLine{file: path, line: n, prog: prog, text: rest, section: section})
					last = len(out) - 1
				}
			}
		}
	}
	return out
}

// shellWords splits a command line as a POSIX shell does for the forms the
// documents use: words, '…' and "…" quoting, $VAR / "$VAR" expanded from
// vars (an unknown variable fails the test: the document uses a name the
// test does not provide; an unquoted one is split into words), and
// redirections (<file, > file), which are dropped: a command's input is
// always empty, its output the test's.
func shellWords(t *testing.T, s string, vars map[string]string) []string {
	t.Helper()
	var words []string
	var cur strings.Builder
	inWord := false
	expand := func(i int, quoted bool) int { // s[i] == '$'
		j := i + 1
		for j < len(s) && (s[j] == '_' || s[j] >= 'A' && s[j] <= 'Z' || s[j] >= '0' && s[j] <= '9') {
			j++
		}
		v, ok := vars[s[i+1:j]]
		require.True(t, ok, "the document uses $%s, which the test does not provide", s[i+1:j])
		if quoted {
			cur.WriteString(v)
			return j
		}
		for k, w := range strings.Fields(v) {
			if k > 0 {
				words = append(words, cur.String())
				cur.Reset()
			}
			cur.WriteString(w)
		}
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
					i = expand(i, true)
					continue
				}
				cur.WriteByte(s[i])
				i++
			}
			require.Less(t, i, len(s), "unterminated \" in %q", s)
			i++
		case c == '$':
			inWord = true
			i = expand(i, false)
		case (c == '<' || c == '>') && !inWord: // a redirection: skip it and its file
			for i++; i < len(s) && (s[i] == ' ' || s[i] == '>'); i++ {
			}
			for ; i < len(s) && s[i] != ' '; i++ {
			}
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

// The documents that show command lines, and where the test runs them.
const (
	docOffline  = "offline"  // no AWS: `envelope` reads files
	docOwn      = "own"      // a table and queues of the document's own
	docShop     = "shop"     // a single-table application's table, as the document's
	docRunbooks = "runbooks" // the runbooks' session
	docAfter    = "after"    // after the runbooks, in their session
	docEffects  = "effects"  // a table where an effect of a provider without idempotency keys was left UNKNOWN
)

// docPlace says where each document's command lines run; a document that
// starts showing command lines must be placed here (the test fails naming
// it). A document may run in two places: its `envelope` lines offline, its
// `inbox` lines in the runbooks' session.
var docPlace = map[string]string{
	"../../../../README.md":         docOwn,
	"../../../../docs/adopt.md":     docShop,
	"../../../../docs/runbooks.md":  docRunbooks,
	"../../../../docs/operate.md":   docAfter,
	"../../../../docs/producers.md": docAfter, // and its `envelope` lines offline
	"../../../../docs/effects.md":   docEffects,
}

// docNotRun are the command lines the test cannot run, each with the test
// that runs its steps instead (by prefix: file, then the command). None
// today.
var docNotRun = map[string]string{}

// exitCode is the status daemon.Main exits with after err.
func exitCode(err error) int {
	var exit *daemonext.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		return exit.Code
	default:
		return 1
	}
}

// TestRunbookCommands runs every `$ ddbworker …` and `$ ddbworker-dev …`
// command line of the README and of docs/*.md (and the README's `$
// invoice-worker …` lines, with the README's service) through the command
// tree its main builds — so a line that needs a development command or
// flag must name ddbworker-dev — against the emulators, and requires each to exit as the document shows — 0 unless
// it shows "(exit N)" or `echo $?` — and each worker or `--every` sweeper
// to keep running until the test stops it (then to exit 0).
//
// Where: the runbooks in the setup their appendix describes — `tables
// create --index-processing`, `queues create --max-receive-count 3`, a
// worker, `send --count 1000 --poison 24 --seed 42` (the seed decides the
// keys the runbooks name) — then operate.md's and producers.md's `inbox`
// lines in that session; the README's on a table and queues of their own;
// adopt.md's on a single-table application's table such as it describes
// (its own GSI1, a GSI2SK that is a number, items with a ttl); effects.md's
// where a worker of a service that charges a provider without idempotency
// keys left the effect it names UNKNOWN; producers.md's `envelope` lines
// offline, on the envelope it shows.
//
// What the test substitutes, and only that: the table (DDBWORKER_TABLE, or
// --table where a document exports its own) and queue names are the test's
// own; $QUEUE_URL, $DLQ_URL and their DDBWORKER_ forms (exported, or
// given to `run` as flags) are its queues;
// --metrics-addr listens on a free port; KEY, the SQS message ids and the
// one key of another session the documents name are resolved to records of
// the same kind in this run. Old behaviour: runbook 2 said a handler's
// terminal failure "fails the same way again, even after the data is fixed
// … Stop here", and nothing ran its commands (its appendix's `tables
// create` then `run --index-processing` is refused today); and only
// runbooks.md and one README block were run.
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
	ddb := dynamodb.NewFromConfig(cfg)
	dropTable := func(name string) {
		t.Cleanup(func() {
			_, _ = ddb.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
		})
	}
	dropTable(table)

	// Every document that shows command lines.
	files, err := filepath.Glob("../../../../docs/*.md")
	require.NoError(t, err)
	files = append([]string{"../../../../README.md"}, files...)
	docs, docVars := map[string][]runbookLine{}, map[string]map[string]string{}
	for _, f := range files {
		docVars[f] = map[string]string{}
		if lines := runbookLines(t, f, docVars[f]); len(lines) > 0 {
			docs[f] = lines
			require.Contains(t, docPlace, f, "%s shows command lines: say in docPlace where the test runs them", f)
		}
	}
	require.Greater(t, len(docs["../../../../docs/runbooks.md"]), 30, "the runbooks' command lines")
	ran := map[string]int{}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type background struct {
		line runbookLine
		done chan error
	}
	var running []background
	var mu sync.Mutex
	// root is the command tree of a document's program, as its main builds
	// it: ddbworker, the example service (no development tools: a line that
	// needs one names ddbworker-dev); ddbworker-dev, the same with the
	// development tools (send; the hidden fault flags); invoice-worker, the
	// README's service.
	root := func(prog string) *cobra.Command {
		switch prog {
		case "invoice-worker":
			return daemon.Command(daemon.App{
				Name: "invoice-worker",
				Register: func(reg *ddbworker.Registry, env daemon.Env) error {
					return (&invoices.Handler{Table: env.Store.Table}).Register(reg)
				},
			})
		case "effects-example":
			return daemon.Command(effectsApp())
		case "ddbworker-dev":
			app := caseapp.App("", "")
			app.Extension = devcmd.Extension()
			return daemon.Command(app)
		default:
			return daemon.Command(caseapp.App("", ""))
		}
	}
	exec := func(prog string, args []string) (string, error) {
		cmd := root(prog)
		var out, errw bytes.Buffer
		cmd.SetIn(strings.NewReader(""))
		cmd.SetOut(&out)
		cmd.SetErr(&errw)
		cmd.SetArgs(args)
		cctx, stop := context.WithCancel(ctx)
		if !longRunning(args) { // a worker runs until the test stops it
			cctx, stop = context.WithTimeout(ctx, 2*time.Minute)
		}
		defer stop()
		err := cmd.ExecuteContext(cctx)
		if err != nil {
			err = fmt.Errorf("%w\nstdout:\n%s\nstderr:\n%s", err, out.String(), errw.String())
		}
		return out.String(), err
	}
	// takesTable reports whether the command args names has a --table flag.
	takesTable := func(prog string, args []string) bool {
		cmd, _, err := root(prog).Find(args)
		require.NoError(t, err)
		return cmd.Flags().Lookup("table") != nil || cmd.InheritedFlags().Lookup("table") != nil
	}
	// resolve names the documents took from their own session.
	rejectionOf := func(code string) string {
		args := []string{"inbox", "list", "--status", "FAILED_TERMINAL", "--all", "-o", "json"}
		if code != "" {
			args = append(args, "--code", code)
		}
		out, err := exec("ddbworker", args)
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
		t.Fatalf("no rejection of code %q in this run", code)
		return ""
	}
	var key string // a work item that failed for good in this run, for KEY
	otherSession := map[string]func() string{
		// runbook 3's hash-mismatch rejection, runbook 2's CaseArchived one
		"rejected:a672f5d7-77e9-4328-8560-27e1b3eb1484": func() string { return "rejected:" + rejectionOf("IDEMPOTENCY_HASH_MISMATCH") },
		"rejected:1049af01-58ce-430e-a35b-266647d37872": func() string { return "rejected:" + rejectionOf("UNKNOWN_MESSAGE_TYPE") },
		// runbook 4's crashed work came from another send: a key of this one
		"deadline-8abdf7de-000003": func() string { return "deadline-909335e9-000265" },
		// operate.md's placeholders
		"KEY":                     func() string { return key },
		"rejected:SQS_MESSAGE_ID": func() string { return "rejected:" + rejectionOf("UNKNOWN_MESSAGE_TYPE") },
		// producers.md's rejection of an invalid envelope: any rejection of this run
		"cd8e7a1a-6052-40e9-b531-83763042400a": func() string { return rejectionOf("") },
	}
	// run runs one command line; table, when not empty, is the table of a
	// document that exports its own (--table where the command takes one);
	// ownQueue the name of its queues; files the test's copies of the
	// files the document names.
	run := func(l runbookLine, vars map[string]string, table, ownQueue string, files map[string]string) {
		t.Helper()
		args := shellWords(t, l.text, vars)
		for i, a := range args {
			if resolve, ok := otherSession[a]; ok {
				args[i] = resolve()
			}
			if f, ok := files[a]; ok {
				args[i] = f
			}
			if a == "--metrics-addr" && i+1 < len(args) {
				args[i+1] = "127.0.0.1:0"
			}
		}
		if args[0] == "run" && !slices.Contains(args, "--metrics-addr") {
			args = append(args, "--metrics-addr", "127.0.0.1:0")
		}
		if args[0] == "run" && !slices.Contains(args, "--queue-url") && vars["DDBWORKER_QUEUE_URL"] != "" {
			// the document exported what queues create printed
			args = append(args, "--queue-url", vars["DDBWORKER_QUEUE_URL"], "--dlq-url", vars["DDBWORKER_DLQ_URL"])
		}
		if table != "" && takesTable(l.prog, args) {
			args = append(args, "--table", table)
		}
		if args[0] == "queues" && args[1] == "create" {
			args = append(args, "--queue", ownQueue)
		}
		mu.Lock()
		ran[l.file]++
		mu.Unlock()
		if longRunning(args) {
			done := make(chan error, 1)
			go func() {
				_, err := exec(l.prog, args)
				done <- err
			}()
			select { // it keeps running: a worker that gives up does so at once
			case err := <-done:
				t.Fatalf("%s:%d (%s): `%s %s` must keep running; it exited: %v", l.file, l.line, l.section, l.prog, l.text, err)
			case <-time.After(2 * time.Second):
			}
			mu.Lock()
			running = append(running, background{line: l, done: done})
			mu.Unlock()
			return
		}
		out, err := exec(l.prog, args)
		require.Equal(t, l.exit, exitCode(err), "%s:%d (%s): `%s %s` exits %d: %v", l.file, l.line, l.section, l.prog, l.text, l.exit, err)
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
	skipped := 0
	runDoc := func(file string, keep func(runbookLine) bool, vars map[string]string, table, ownQueue string, files map[string]string) {
		t.Helper()
		for _, l := range docs[file] {
			if !keep(l) {
				continue
			}
			if why, ok := notRunWhy(l); ok {
				t.Logf("%s:%d: `%s %s` not run here: %s", l.file, l.line, l.prog, l.text, why)
				skipped++
				continue
			}
			run(l, vars, table, ownQueue, files)
		}
	}
	all := func(runbookLine) bool { return true }
	isEnvelope := func(l runbookLine) bool { return strings.HasPrefix(l.text, "envelope ") }

	// Offline: producers.md's `envelope` lines, on the envelope it shows
	// (message.json) and that envelope with a time of Python's utcnow()
	// (utcnow.json).
	producers := "../../../../docs/producers.md"
	dir := t.TempDir()
	b, err := os.ReadFile(producers)
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(b), "## One message, one envelope")
	require.True(t, ok)
	_, rest, ok = strings.Cut(rest, "```json\n")
	require.True(t, ok)
	envelopeJSON, _, _ := strings.Cut(rest, "```")
	utcnow := strings.Replace(envelopeJSON, `"occurredAt": "2026-03-01T12:00:00Z"`, `"occurredAt": "2026-03-01T12:00:00.512345"`, 1)
	require.NotEqual(t, envelopeJSON, utcnow, "the envelope's occurredAt")
	docFiles := map[string]string{"message.json": filepath.Join(dir, "message.json"), "utcnow.json": filepath.Join(dir, "utcnow.json")}
	require.NoError(t, os.WriteFile(docFiles["message.json"], []byte(envelopeJSON), 0o600))
	require.NoError(t, os.WriteFile(docFiles["utcnow.json"], []byte(utcnow), 0o600))
	runDoc(producers, isEnvelope, docVars[producers], "", "", docFiles)

	// The README: its service on a table and queues of its own.
	readmeTable := testenv.Unique("readme")
	dropTable(readmeTable)
	runDoc("../../../../README.md", all, docVars["../../../../README.md"], readmeTable, testenv.Unique("readme"), nil)

	// adopt.md: a single-table application's table — key PK/SK, its own
	// GSI1 (ALL) holding its items, a leaderboard whose GSI2SK is a score,
	// carts with a ttl of their own, TTL off.
	shop := testenv.Unique("shop")
	dropTable(shop)
	createShop(t, ddb, shop)
	runDoc("../../../../docs/adopt.md", all, docVars["../../../../docs/adopt.md"], shop, "", nil)

	// effects.md: its effect, OrderSend/o-2:payment/charge — a charge of a
	// provider without idempotency keys whose answer was lost — left
	// UNKNOWN by a worker of its own on a table and queues of their own.
	effectsTable, effectsVars := testenv.Unique("effects"), map[string]string{}
	dropTable(effectsTable)
	_, err = exec("effects-example", []string{"tables", "create", "--table", effectsTable})
	require.NoError(t, err)
	out, err := exec("effects-example", []string{"queues", "create", "--queue", testenv.Unique("effects")})
	require.NoError(t, err)
	for _, kv := range strings.Fields(out) {
		if k, v, ok := strings.Cut(kv, "="); ok {
			effectsVars[k] = v
		}
	}
	t.Cleanup(func() {
		for _, u := range []string{effectsVars["DDBWORKER_QUEUE_URL"], effectsVars["DDBWORKER_DLQ_URL"]} {
			_, _ = sqs.NewFromConfig(cfg).DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: aws.String(u)})
		}
	})
	run(runbookLine{file: "(the test's effects worker)", prog: "effects-example", text: "run --table " + effectsTable + " --queue-url " + effectsVars["DDBWORKER_QUEUE_URL"] + " --dlq-url " + effectsVars["DDBWORKER_DLQ_URL"]}, effectsVars, "", "", nil)
	_, err = sqs.NewFromConfig(cfg).SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(effectsVars["DDBWORKER_QUEUE_URL"]), MessageBody: aws.String(`{
		"messageId": "m-o-2", "schemaVersion": 1, "messageType": "OrderSend", "producer": "shop", "occurredAt": "2026-12-03T14:56:08Z",
		"idempotencyKey": "o-2:payment", "aggregateType": "order", "aggregateId": "o-2", "payload": {"orderId": "o-2", "amountCents": 1999}}`)})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		out, err := exec("ddbworker", []string{"effects", "get", "OrderSend/o-2:payment/charge", "--table", effectsTable})
		return err == nil && strings.Contains(out, "UNKNOWN")
	}, time.Minute, 200*time.Millisecond, "the effect of effects.md, UNKNOWN")
	runDoc("../../../../docs/effects.md", all, docVars["../../../../docs/effects.md"], effectsTable, "", nil)

	// The runbooks: the appendix's setup first, as the session did.
	vars := map[string]string{}
	var setup, rest2 []runbookLine
	for _, l := range docs["../../../../docs/runbooks.md"] {
		if strings.HasPrefix(l.section, "Appendix") {
			setup = append(setup, l)
		} else {
			rest2 = append(rest2, l)
		}
	}
	require.Len(t, setup, 4, "tables create, queues create, run, send")
	for _, l := range setup {
		run(l, vars, "", queue, nil)
	}
	require.Eventually(t, func() bool { return testenv.InspectQueue(t, vars["DLQ_URL"]).Total() >= 26 }, 2*time.Minute, time.Second,
		"the send's 26 DLQ messages, as runbook 2 counts them")
	for _, l := range rest2 {
		run(l, vars, "", queue, nil)
	}

	// After the runbooks, in their session: KEY is a work item that failed
	// for good in this run (the CASE_NOT_FOUND work the runbook reopened
	// and redrove fails again: the test fixed no data).
	require.Eventually(t, func() bool {
		out, err := exec("ddbworker", []string{"inbox", "list", "--status", "FAILED_TERMINAL", "--code", "CASE_NOT_FOUND", "--all", "-o", "json"})
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
	}, time.Minute, time.Second, "a FAILED_TERMINAL work item for KEY")
	for _, f := range []string{"../../../../docs/operate.md", producers} {
		runDoc(f, func(l runbookLine) bool { return !isEnvelope(l) }, vars, "", queue, nil)
	}

	cancel()
	for _, b := range running {
		select {
		case err := <-b.done:
			require.NoError(t, err, "%s:%d: `%s %s` stops cleanly", b.line.file, b.line.line, b.line.prog, b.line.text)
		case <-time.After(time.Minute):
			t.Fatalf("%s:%d: `%s %s` did not stop", b.line.file, b.line.line, b.line.prog, b.line.text)
		}
	}
	total := 0
	for f, lines := range docs {
		require.Equal(t, len(lines), ran[f]+notRunCount(lines), "%s: every command line runs, or says why not in docNotRun", f)
		total += len(lines)
		t.Logf("%s: ran %d of its %d command lines", strings.TrimPrefix(f, "../../"), ran[f], len(lines))
	}
	t.Logf("ran %d command lines of %d documents (%d processes kept running until the end); %d not run (docNotRun)", total-skipped, len(docs), len(running), skipped)
}

// effectsApp is a service whose one handler charges through the effect log
// a provider without idempotency keys whose answer never comes: the effect
// ends UNKNOWN, as effects.md's does (there, the worker was killed in the
// call).
func effectsApp() daemon.App {
	return daemon.App{
		Name: "effects-example",
		Register: func(reg *ddbworker.Registry, env daemon.Env) error {
			log, err := effects.New(env.DynamoDB, effects.Config{Inbox: env.Store, Table: env.Store.Table})
			if err != nil {
				return err
			}
			return reg.Register("OrderSend", ddbworker.JSON(func(ctx context.Context, msg *ddbworker.Message, p map[string]any) (ddbworker.Result, error) {
				eff, err := log.Do(ctx, msg, effects.Call{Name: "charge", Provider: "legacy-pay", Operation: "charge", Request: p},
					func(context.Context, string) (effects.Outcome, error) {
						return effects.Outcome{}, errors.New("read timeout: the provider's answer was lost")
					})
				if err != nil {
					return ddbworker.Result{}, err
				}
				return ddbworker.Apply(eff.Write()), nil
			}))
		},
	}
}

// notRunWhy says why the test does not run l, if docNotRun names it.
func notRunWhy(l runbookLine) (string, bool) {
	for prefix, why := range docNotRun {
		file, cmd, _ := strings.Cut(prefix, ": ")
		if l.file == file && strings.HasPrefix(l.text, cmd) {
			return why, true
		}
	}
	return "", false
}

func notRunCount(lines []runbookLine) int {
	n := 0
	for _, l := range lines {
		if _, ok := notRunWhy(l); ok {
			n++
		}
	}
	return n
}

// createShop makes the table adopt.md starts from: a single-table
// application's, key PK/SK, its own GSI1 (GSI1PK, GSI1SK) projected ALL,
// TTL off; customers in GSI1, a leaderboard whose GSI2SK is a number (a
// string index on it would refuse their writes), carts with a ttl of their
// own, two of them in the past.
func createShop(t *testing.T, ddb *dynamodb.Client, name string) {
	t.Helper()
	ctx := context.Background()
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	n := func(v int64) types.AttributeValue {
		return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
	}
	_, err := ddb.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:   aws.String(name),
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String("PK"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("SK"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("GSI1PK"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("GSI1SK"), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String("PK"), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String("SK"), KeyType: types.KeyTypeRange},
		},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{{
			IndexName: aws.String("GSI1"),
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String("GSI1PK"), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String("GSI1SK"), KeyType: types.KeyTypeRange},
			},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll},
		}},
	})
	require.NoError(t, err)
	require.NoError(t, dynamodb.NewTableExistsWaiter(ddb).Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}, time.Minute))
	now := time.Now().Unix()
	var items []map[string]types.AttributeValue
	for i := range 5 {
		id := fmt.Sprintf("%03d", i)
		items = append(items,
			map[string]types.AttributeValue{"PK": s("CUSTOMER#" + id), "SK": s("PROFILE"), "GSI1PK": s("CUSTOMERS"), "GSI1SK": s("customer-" + id)},
			map[string]types.AttributeValue{"PK": s("LEADERBOARD"), "SK": s("CUSTOMER#" + id), "GSI2PK": s("SCORES"), "GSI2SK": n(int64(100 * i))},
			map[string]types.AttributeValue{"PK": s("CART#" + id), "SK": s("CART"), "ttl": n(now + int64(3600*(i-2)))})
	}
	for _, item := range items {
		_, err := ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(name), Item: item})
		require.NoError(t, err)
	}
}

// The extraction finds what a reader sees: fenced `$ ddbworker` lines only,
// quoting, variables and redirections as the shell reads them, and the exit
// status the document shows after a command.
func TestRunbookLineParsing(t *testing.T) {
	vars := map[string]string{"DLQ_URL": "http://q/dlq", "LAYOUT": "--a x --b y"}
	require.Equal(t, []string{"dlq", "redrive", "--dlq-url", "http://q/dlq", "--filter", "code=(none: redrive policy)", "--reason", "a b"},
		shellWords(t, `dlq redrive --dlq-url "$DLQ_URL" --filter 'code=(none: redrive policy)' --reason "a b"  # comment`, vars))
	require.Equal(t, []string{"tables", "adopt", "--yes", "--a", "x", "--b", "y"}, shellWords(t, `tables adopt --yes $LAYOUT </dev/null`, vars))
	require.Equal(t, []string{"envelope", "schema"}, shellWords(t, `envelope schema > envelope.schema.json`, vars))
	require.True(t, longRunning([]string{"sweep", "--every", "1m"}))
	require.False(t, longRunning([]string{"sweep", "--dry-run"}))
	require.Regexp(t, regexp.MustCompile(`^inbox reopen --code CASE_NOT_FOUND`), func() string {
		for _, l := range runbookLines(t, "../../../../docs/runbooks.md", nil) {
			if strings.HasPrefix(l.text, "inbox reopen") {
				return l.text
			}
		}
		return ""
	}(), "runbook 2 reopens in bulk")

	adoptVars := map[string]string{}
	adopt := runbookLines(t, "../../../../docs/adopt.md", adoptVars)
	require.Len(t, adopt, 6)
	exits := make([]int, len(adopt))
	for i, l := range adopt {
		exits[i] = l.exit
	}
	require.Equal(t, []int{1, 0, 1, 0, 0, 1}, exits, "adopt.md's (exit N) lines")
	require.Contains(t, adoptVars["LAYOUT"], "--aggregate-index ddbworker-aggregate")
	require.NotContains(t, adoptVars, "DDBWORKER_TABLE", "the test's own")

	var validate []int
	for _, l := range runbookLines(t, "../../../../docs/producers.md", nil) {
		if strings.HasPrefix(l.text, "envelope validate") {
			validate = append(validate, l.exit)
		}
	}
	require.Equal(t, []int{0, 1}, validate, "producers.md: `echo $?` after the second validate")

	var resolve string
	for _, l := range runbookLines(t, "../../../../docs/effects.md", nil) {
		if strings.HasPrefix(l.text, "effects resolve") {
			resolve = l.text
		}
	}
	require.Contains(t, resolve, `--ref ch_0001 --reason "charge found`, "effects.md's continued line")

	readme := runbookLines(t, "../../../../README.md", nil)
	require.NotEmpty(t, readme)
	for _, l := range readme {
		require.Equal(t, "invoice-worker", l.prog, "the README's lines are its service's")
	}
}
