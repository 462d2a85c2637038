package ddbworker_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The README is a front page read in five minutes: what ddbworker is, a
// handler, a main, a test, the two set-up commands, links. Everything else
// lives in docs/ (docs/README.md indexes it).
const readmeMaxLines = 250

func TestReadmeLength(t *testing.T) {
	b, err := os.ReadFile("README.md")
	require.NoError(t, err)
	lines := strings.Count(string(b), "\n")
	require.LessOrEqual(t, lines, readmeMaxLines, "README.md has %d lines: move the detail into docs/", lines)
}

// mdLink is a Markdown link outside code: [text](target).
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// inlineCode is a code span, whose text is not a link.
var inlineCode = regexp.MustCompile("`[^`]*`")

// anchorDrop is what GitHub drops from a heading to make its anchor.
var anchorDrop = regexp.MustCompile(`[^\p{L}\p{N}_\- ]`)

// anchors returns the heading anchors of a Markdown file as GitHub makes
// them: lower case, punctuation dropped, spaces to hyphens, a repeated
// heading suffixed -1, -2, ….
func anchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	out, seen := map[string]bool{}, map[string]int{}
	fenced := false
	for line := range strings.Lines(string(b)) {
		line = strings.TrimRight(line, "\n")
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		text := strings.TrimSpace(strings.TrimLeft(line, "#"))
		a := strings.ReplaceAll(anchorDrop.ReplaceAllString(strings.ToLower(text), ""), " ", "-")
		if n := seen[a]; n > 0 {
			out[a+"-"+strconv.Itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// Every relative link of the README, of docs/*.md and of the module's
// other Markdown files names a file that exists and, into a Markdown file,
// a heading that exists: moving a section must move its links too.
func TestDocLinks(t *testing.T) {
	var files []string
	require.NoError(t, filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || d.Name() == "bin") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			files = append(files, path)
		}
		return nil
	}))
	require.Contains(t, files, "README.md")
	require.Contains(t, files, filepath.Join("docs", "README.md"))
	checked := 0
	for _, file := range files {
		b, err := os.ReadFile(file)
		require.NoError(t, err)
		fenced := false
		for n, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "```") {
				fenced = !fenced
				continue
			}
			if fenced {
				continue
			}
			for _, m := range mdLink.FindAllStringSubmatch(inlineCode.ReplaceAllString(line, "``"), -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				path, anchor, _ := strings.Cut(target, "#")
				dest := file
				if path != "" {
					dest = filepath.Join(filepath.Dir(file), path)
					_, err := os.Stat(dest)
					require.NoError(t, err, "%s:%d: the link %s names no file", file, n+1, target)
				}
				if anchor != "" && strings.HasSuffix(dest, ".md") {
					require.True(t, anchors(t, dest)[anchor], "%s:%d: the link %s names no heading of %s", file, n+1, target, dest)
				}
				checked++
			}
		}
	}
	require.Greater(t, checked, 100, "the links checked")
}

// The README's Go blocks are the real code, not a sketch of it: each is
// the lines of the file its "From [`…`](…)" sentence names, in order, with
// lines left out where the README shortens (blank lines and runs of spaces
// do not count). The three files compile and their tests run: the handler
// is internal/invoices/invoices.go, the main
// example/invoices/cmd/invoice-worker/main.go, the unit test
// TestOpenOrderIsInvoiced in internal/invoices/invoices_test.go.
func TestReadmeSnippets(t *testing.T) {
	b, err := os.ReadFile("README.md")
	require.NoError(t, err)
	from := regexp.MustCompile("From\\s+\\[`[^`]+`\\]\\(([^)]+)\\)")
	norm := func(s string) []string {
		var out []string
		for l := range strings.Lines(s) {
			if l = strings.Join(strings.Fields(l), " "); l != "" {
				out = append(out, l)
			}
		}
		return out
	}
	var source string
	blocks := 0
	text := string(b)
	for {
		i := strings.Index(text, "```go\n")
		if i < 0 {
			break
		}
		if m := from.FindAllStringSubmatch(text[:i], -1); len(m) > 0 {
			source = m[len(m)-1][1]
		}
		end := strings.Index(text[i+6:], "\n```")
		require.GreaterOrEqual(t, end, 0)
		block := text[i+6 : i+6+end]
		text = text[i+6+end:]
		require.NotEmpty(t, source, "a Go block with no \"From [file](file)\" before it:\n%s", block)
		if st, err := os.Stat(source); err == nil && st.IsDir() {
			source = filepath.Join(source, "main.go")
		}
		src, err := os.ReadFile(source)
		require.NoError(t, err)
		have := norm(string(src))
		j := 0
		for _, want := range norm(block) {
			for j < len(have) && have[j] != want {
				j++
			}
			require.Less(t, j, len(have), "README's block from %s: the line %q is not in it (in order)", source, want)
			j++
		}
		blocks++
		source = ""
	}
	require.Equal(t, 3, blocks, "the README's Go blocks: a handler, a main, a unit test")
}

// docs/README.md indexes every document of docs/ by its reader: a new
// document gets its line there.
func TestDocsIndex(t *testing.T) {
	index, err := os.ReadFile(filepath.Join("docs", "README.md"))
	require.NoError(t, err)
	docs, err := filepath.Glob(filepath.Join("docs", "*.md"))
	require.NoError(t, err)
	require.Greater(t, len(docs), 10)
	for _, d := range docs {
		if name := filepath.Base(d); name != "README.md" {
			require.Contains(t, string(index), "]("+name+")", "docs/README.md has no line for %s", name)
		}
	}
}
