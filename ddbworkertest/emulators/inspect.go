package emulators

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// QueueState is what a queue of fauxqs holds, exactly and at once (SQS's
// ApproximateNumberOf* attributes are approximate, and fauxqs updates them
// only on the next receive).
type QueueState struct {
	Ready, Delayed, InFlight int
}

// Total is every message still in the queue.
func (q QueueState) Total() int { return q.Ready + q.Delayed + q.InFlight }

// InspectQueue reads the state of the queue at queueURL from fauxqs's
// inspection endpoint, without receiving anything: a test waits for "the
// queue is empty" or "two messages in the DLQ" with it.
func (e *Env) InspectQueue(ctx context.Context, queueURL string) (QueueState, error) {
	return e.Endpoints.InspectQueue(ctx, queueURL)
}

// InspectQueue is Env.InspectQueue for emulators that run elsewhere.
func (ep Endpoints) InspectQueue(ctx context.Context, queueURL string) (QueueState, error) {
	name := queueURL[strings.LastIndexByte(queueURL, '/')+1:]
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(ep.SQS, "/")+"/_fauxqs/queues/"+url.PathEscape(name), nil)
	if err != nil {
		return QueueState{}, fmt.Errorf("emulators: inspect %s: %w", name, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return QueueState{}, fmt.Errorf("emulators: inspect %s: %w", name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return QueueState{}, fmt.Errorf("emulators: inspect %s: %s", name, resp.Status)
	}
	var body struct {
		Messages struct {
			Ready    []json.RawMessage `json:"ready"`
			Delayed  []json.RawMessage `json:"delayed"`
			Inflight []json.RawMessage `json:"inflight"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return QueueState{}, fmt.Errorf("emulators: inspect %s: %w", name, err)
	}
	return QueueState{Ready: len(body.Messages.Ready), Delayed: len(body.Messages.Delayed), InFlight: len(body.Messages.Inflight)}, nil
}
