package devcmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ddbworker/ddbworker/internal/daemonext"
	"github.com/ddbworker/ddbworker/internal/ddbproxy"
)

// phase is one step of a fault proxy's schedule.
type phase struct {
	mode ddbproxy.Mode
	for_ time.Duration // 0: until the command ends
}

// modeNamed is the proxy mode a schedule step names.
func modeNamed(name string) (ddbproxy.Mode, bool) {
	switch name {
	case "pass":
		return ddbproxy.Pass, true
	case "throttle":
		return ddbproxy.Throttle, true
	case "5xx":
		return ddbproxy.ServerError, true
	case "hang":
		return ddbproxy.Hang, true
	}
	return 0, false
}

// parseSchedule reads "mode duration, mode duration, …, mode" (the last
// step may omit its duration: it lasts until the command ends).
func parseSchedule(s string) ([]phase, error) {
	var out []phase
	parts := strings.Split(s, ",")
	for i, part := range parts {
		f := strings.Fields(part)
		if len(f) == 0 || len(f) > 2 {
			return nil, fmt.Errorf("--schedule step %q: want \"MODE DURATION\" (MODE: pass, throttle, 5xx, hang)", strings.TrimSpace(part))
		}
		m, ok := modeNamed(f[0])
		if !ok {
			return nil, fmt.Errorf("--schedule step %q: mode %q is not pass, throttle, 5xx or hang", strings.TrimSpace(part), f[0])
		}
		p := phase{mode: m}
		if len(f) == 2 {
			d, err := time.ParseDuration(f[1])
			if err != nil || d <= 0 {
				return nil, fmt.Errorf("--schedule step %q: %q is not a positive duration", strings.TrimSpace(part), f[1])
			}
			p.for_ = d
		} else if i != len(parts)-1 {
			return nil, fmt.Errorf("--schedule step %q: only the last step may omit its duration", strings.TrimSpace(part))
		}
		out = append(out, p)
	}
	return out, nil
}

func newFaultProxyCmd(g daemonext.Globals) *cobra.Command {
	var listen, schedule string
	cmd := &cobra.Command{
		Use:   "faultproxy",
		Short: "Serve a DynamoDB fault proxy on 127.0.0.1 that throttles, fails (5xx) or hangs on a schedule (outage drills)",
		Long: `faultproxy forwards DynamoDB requests to --dynamodb-endpoint, except during the
schedule's fault steps, when it answers like a sick DynamoDB: throttle (400
ProvisionedThroughputExceededException), 5xx (500/503), hang (no answer until the
client gives up). Point a worker's --dynamodb-endpoint at the address it prints
to rehearse an outage, e.g.

  ddbworker-dev faultproxy --dynamodb-endpoint http://127.0.0.1:8000 \
      --schedule "pass 30s, throttle 2m, pass"`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			target, _ := g.Endpoints()
			if target == "" {
				return errors.New("--dynamodb-endpoint (DDBWORKER_DYNAMODB_ENDPOINT) is required: the DynamoDB the proxy forwards to")
			}
			steps, err := parseSchedule(schedule)
			if err != nil {
				return err
			}
			p, err := ddbproxy.Start(ddbproxy.Config{Target: target, Addr: listen})
			if err != nil {
				return err
			}
			defer p.Close()
			return runSchedule(cmd.Context(), p, steps, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:0", "loopback address to serve on")
	cmd.Flags().StringVar(&schedule, "schedule", "pass", `steps "MODE DURATION, …, MODE" with MODE pass, throttle, 5xx or hang`)
	return cmd
}

// runSchedule walks the steps, printing each with the requests the previous
// one saw, until the last step's duration ends or ctx does.
func runSchedule(ctx context.Context, p *ddbproxy.Proxy, steps []phase, out io.Writer) error {
	fmt.Fprintf(out, "faultproxy: serving %s\n", p.URL())
	start := time.Now()
	for i, st := range steps {
		p.SetMode(st.mode)
		before := p.Stats().Total
		began := time.Now()
		length := "until stopped"
		if st.for_ > 0 {
			length = st.for_.String()
		}
		fmt.Fprintf(out, "faultproxy: %s  step %d: %s for %s\n", time.Since(start).Round(time.Second), i+1, strings.ToLower(st.mode.String()), length)
		var wait <-chan time.Time
		if st.for_ > 0 {
			wait = time.After(st.for_)
		}
		select {
		case <-ctx.Done():
		case <-wait:
		}
		n := p.Stats().Total - before
		secs := time.Since(began).Seconds()
		fmt.Fprintf(out, "faultproxy: %s  step %d done: %d requests in %.0fs (%.2f/s)\n", time.Since(start).Round(time.Second), i+1, n, secs, float64(n)/secs)
		if ctx.Err() != nil {
			return nil
		}
	}
	return nil
}
