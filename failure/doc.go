// Package failure owns ddbworker's failure taxonomy: the two kinds
// (retryable and terminal), the codes the worker itself assigns, the typed
// error a handler returns to say which kind it met, and the classification of
// AWS SDK errors (throttling, conflicts, 5xx, timeouts) into those kinds.
//
// It also owns the one attempts policy (Policy: maxAttempts, retryableUntil,
// terminalAfterCodes) that the gate asks before a takeover and the worker
// after a failed attempt. It does not decide what happens next (backoff,
// DLQ); the worker does, from the kind and code found here.
package failure
