package invoices_test

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A Dockerfile, parsed enough for service_test.go: stages, their
// instructions, build arguments with their defaults (no heredocs).

type dfInstruction struct{ cmd, args string }

type dfStage struct {
	pos   int
	from  string
	name  string
	instr []dfInstruction
}

type parsedDockerfile struct {
	args   map[string]string // ARGs before the first FROM, with defaults
	stages []*dfStage
}

func parseDockerfile(t *testing.T, path string) *parsedDockerfile {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	df := &parsedDockerfile{args: map[string]string{}}
	var logical strings.Builder
	flush := func() {
		line := strings.TrimSpace(logical.String())
		logical.Reset()
		if line == "" {
			return
		}
		cmd, args, _ := strings.Cut(line, " ")
		cmd, args = strings.ToUpper(cmd), strings.TrimSpace(args)
		switch {
		case cmd == "FROM":
			f := strings.Fields(args)
			st := &dfStage{pos: len(df.stages), from: f[0]}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				st.name = f[2]
			}
			df.stages = append(df.stages, st)
		case len(df.stages) == 0:
			require.Equalf(t, "ARG", cmd, "%s: only ARG may come before the first FROM", path)
			k, v := splitAssign(t, args)
			df.args[k] = v
		default:
			st := df.stages[len(df.stages)-1]
			st.instr = append(st.instr, dfInstruction{cmd: cmd, args: args})
		}
	}
	for _, l := range strings.Split(string(raw), "\n") {
		trimmed := strings.TrimSpace(l)
		if strings.HasPrefix(trimmed, "#") {
			continue // comments, also inside continuations
		}
		if c, ok := strings.CutSuffix(trimmed, "\\"); ok {
			logical.WriteString(c + " ")
			continue
		}
		logical.WriteString(trimmed)
		flush()
	}
	flush()
	require.NotEmptyf(t, df.stages, "%s has no FROM", path)
	return df
}

// stage returns the stage named (or numbered) ref, nil if none.
func (d *parsedDockerfile) stage(ref string) *dfStage {
	for _, s := range d.stages {
		if s.name == ref || strconv.Itoa(s.pos) == ref {
			return s
		}
	}
	return nil
}

// expand substitutes $NAME and ${NAME} in text as the stage sees them:
// set overrides a build argument (--build-arg), else the stage's ARG
// default, else the global one.
func (d *parsedDockerfile) expand(s *dfStage, text string, set map[string]string) string {
	return regexp.MustCompile(`\$\{(\w+)\}|\$(\w+)`).ReplaceAllStringFunc(text, func(m string) string {
		name := strings.Trim(m, "${}")
		if !s.declares(name) {
			return m // not a build argument: the shell's
		}
		if v, ok := set[name]; ok {
			return v
		}
		for _, in := range s.instr {
			if in.cmd == "ARG" {
				if k, v, ok := strings.Cut(in.args, "="); ok && k == name {
					return unquote(v)
				}
			}
		}
		return d.args[name]
	})
}

// ldflags returns the -ldflags value of a go build command line.
func ldflags(t *testing.T, cmdline string) string {
	t.Helper()
	m := regexp.MustCompile(`-ldflags[= ]+(?:"([^"]*)"|'([^']*)'|(\S+))`).FindStringSubmatch(cmdline)
	require.NotNilf(t, m, "no -ldflags in %q", cmdline)
	return m[1] + m[2] + m[3]
}

// declares reports whether the stage declares ARG name.
func (s *dfStage) declares(name string) bool {
	return slices.ContainsFunc(s.instr, func(in dfInstruction) bool {
		k, _, _ := strings.Cut(in.args, "=")
		return in.cmd == "ARG" && k == name
	})
}

// copyFrom is the --from of the COPY that writes dest.
func (s *dfStage) copyFrom(dest string) string {
	for _, in := range s.instr {
		f := strings.Fields(in.args)
		if in.cmd != "COPY" || len(f) < 2 || f[len(f)-1] != dest {
			continue
		}
		for _, x := range f {
			if v, ok := strings.CutPrefix(x, "--from="); ok {
				return v
			}
		}
	}
	return ""
}

// run returns the first RUN that contains sub.
func (s *dfStage) run(sub string) string {
	if i := s.index("RUN", sub); i >= 0 {
		return s.instr[i].args
	}
	return ""
}

// index is the position of the first cmd instruction that contains sub.
func (s *dfStage) index(cmd, sub string) int {
	return slices.IndexFunc(s.instr, func(in dfInstruction) bool { return in.cmd == cmd && strings.Contains(in.args, sub) })
}

// last returns the arguments of the stage's last cmd instruction.
func (s *dfStage) last(cmd string) string {
	out := ""
	for _, in := range s.instr {
		if in.cmd == cmd {
			out = in.args
		}
	}
	return out
}

// execForm decodes the stage's last cmd, which must be in exec (JSON)
// form: distroless has no shell.
func (s *dfStage) execForm(t *testing.T, cmd string) []string {
	t.Helper()
	raw := s.last(cmd)
	require.NotEmptyf(t, raw, "the final stage has no %s", cmd)
	var out []string
	require.NoErrorf(t, json.Unmarshal([]byte(raw), &out), "%s %s must be in exec (JSON) form: distroless has no shell", cmd, raw)
	return out
}

func (s *dfStage) exposed() []string {
	var out []string
	for _, in := range s.instr {
		if in.cmd == "EXPOSE" {
			for _, f := range strings.Fields(in.args) {
				port, _, _ := strings.Cut(f, "/")
				out = append(out, port)
			}
		}
	}
	return out
}

// env is the stage's ENV, KEY=value form.
func (s *dfStage) env() map[string]string {
	out := map[string]string{}
	for _, in := range s.instr {
		if in.cmd == "ENV" {
			for _, w := range words(in.args) {
				if k, v, ok := strings.Cut(w, "="); ok {
					out[k] = v
				}
			}
		}
	}
	return out
}

// labels are the stage's LABELs, values unquoted and not expanded.
func (s *dfStage) labels(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, in := range s.instr {
		if in.cmd == "LABEL" {
			for _, w := range words(in.args) {
				k, v, ok := strings.Cut(w, "=")
				require.Truef(t, ok, "LABEL %s: want key=value", w)
				out[k] = v
			}
		}
	}
	return out
}

func splitAssign(t *testing.T, s string) (string, string) {
	t.Helper()
	k, v, _ := strings.Cut(s, "=")
	require.NotEmpty(t, k, s)
	return k, unquote(v)
}

func unquote(s string) string {
	if w := words(s); len(w) == 1 {
		return w[0]
	}
	return s
}

// words splits s at blanks outside double quotes, dropping the quotes.
func words(s string) []string {
	var out []string
	var cur strings.Builder
	inWord, quoted := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\' && quoted && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
		case c == '"':
			quoted, inWord = !quoted, true
		case (c == ' ' || c == '\t') && !quoted:
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out
}
