package daemon

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/ddbworker/ddbworker/envelope"
	"github.com/ddbworker/ddbworker/internal/daemonext"
)

// newEnvelopeCmd is `envelope validate|hash|schema`: what a producer team
// runs on a message before it sends it. Offline: no AWS call.
func newEnvelopeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "envelope",
		Short: "Check a message envelope the way the worker decodes it (offline)",
		Long: `Check a message body the way the worker decodes it, with the default limits
(the ones run uses), without any AWS call. FILE is a path, or - for stdin.

  validate FILE   "valid" and exit 0, or the rejection's code, field and
                  reason and exit 1 (the code the worker would record)
  hash FILE       the request hash the worker computes ("v2:<hex>"): two
                  messages with one idempotency key and message type are
                  the same work when their hashes are equal, else
                  IDEMPOTENCY_HASH_MISMATCH
  schema          the envelope's JSON Schema (draft 2020-12)

docs/producers.md describes every field and limit.`,
	}
	var hashVersion string
	validate := &cobra.Command{
		Use:   "validate FILE|-",
		Short: `Decode a message body: "valid" (exit 0), or its code, field and reason (exit 1)`,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, err := decodeEnvelopeArg(cmd, args[0])
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), "valid")
			return nil
		},
	}
	hash := &cobra.Command{
		Use:   "hash FILE|-",
		Short: "Print the request hash the worker computes for a message body",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			v, err := parseHashVersion(hashVersion)
			if err != nil {
				return err
			}
			e, err := decodeEnvelopeArg(cmd, args[0])
			if err != nil {
				return err
			}
			h, err := envelope.RequestHashVersion(e, v)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), h)
			return nil
		},
	}
	hash.Flags().StringVar(&hashVersion, "hash-version", envelope.CurrentHashVersion.String(),
		"canonical form: v3 (what the worker writes today), v2 or v1 (records written by older workers; v1 is unprefixed hex)")
	schema := &cobra.Command{
		Use:   "schema",
		Short: "Print the envelope's JSON Schema (draft 2020-12)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := cmd.OutOrStdout().Write(envelope.Schema())
			return err
		},
	}
	cmd.AddCommand(validate, hash, schema)
	return cmd
}

func parseHashVersion(s string) (envelope.HashVersion, error) {
	for _, v := range []envelope.HashVersion{envelope.HashV1, envelope.HashV2, envelope.HashV3} {
		if s == v.String() {
			return v, nil
		}
	}
	return 0, fmt.Errorf("--hash-version %q: want v1, v2 or v3", s)
}

// decodeEnvelopeArg reads FILE (or stdin for "-") and decodes it with the
// default limits. A rejection is printed (code, field, reason) and
// returned as exit status 1.
func decodeEnvelopeArg(cmd *cobra.Command, arg string) (*envelope.Envelope, error) {
	var r io.Reader
	if arg == "-" {
		r = cmd.InOrStdin()
	} else {
		f, err := os.Open(arg)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	// One byte past the limit is enough for the decoder to say "too large".
	body, err := io.ReadAll(io.LimitReader(r, envelope.DefaultMaxBodyBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", arg, err)
	}
	e, err := (*envelope.Decoder)(nil).Decode(body)
	var ee *envelope.Error
	if errors.As(err, &ee) {
		out := cmd.OutOrStdout()
		fmt.Fprintln(out, "code:   "+string(ee.Code))
		fmt.Fprintln(out, "field:  "+orDash(ee.Field))
		reason := ee.Reason
		if ee.Err != nil {
			reason += ": " + ee.Err.Error()
		}
		fmt.Fprintln(out, "reason: "+reason)
		return nil, &daemonext.ExitError{Code: 1, Msg: "envelope: invalid: " + strconv.Quote(string(ee.Code))}
	}
	return e, err
}
