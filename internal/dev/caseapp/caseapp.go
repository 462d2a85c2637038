package caseapp

import (
	"github.com/spf13/pflag"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/daemon"
	"github.com/ddbworker/ddbworker/internal/caseflow"
)

// App is the example service, with the version and revision its binary
// was stamped with ("": the build info's).
func App(version, revision string) daemon.App {
	var fused, single, track bool
	return daemon.App{
		Name:     "ddbworker",
		Table:    "ddbworker",
		Version:  version,
		Revision: revision,
		Flags: func(fs *pflag.FlagSet) {
			fs.BoolVar(&fused, "fused", false, "example domain: the fused commit (one round trip per fresh message)")
			fs.BoolVar(&single, "single-write", false, "example domain: CaseStageChanged on the single-write route (one conditional update fenced in the case item; the other types as --fused says)")
			fs.BoolVar(&track, "track-applications", false, "example domain: keep an application counter per work item (single-write stage changes: in the case item)")
		},
		Register: func(reg *ddbworker.Registry, env daemon.Env) error {
			var opts []ddbworker.RouteOption
			if fused {
				opts = append(opts, ddbworker.Fused())
			}
			return (&caseflow.Handlers{Table: env.Store.Table, TrackApplications: track, SingleWriteStages: single}).Register(reg, opts...)
		},
	}
}
