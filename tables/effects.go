package tables

// Effect-log record attribute names (fixed). An effect record (package
// effects) lives in the application's table beside the inbox records, under
// the Layout's key attributes (PK = EFFECT#<effect key>, SK = EFFECT), its
// TTL attribute, and — while its outcome is UNKNOWN — the attention index
// (AttentionPK = EFFECT#UNKNOWN). It shares the inbox's names where they
// mean the same thing (status, requestHash, messageType, failureCode…).
const (
	AttrEffectKey       = "effectKey"
	AttrEffectName      = "effectName"
	AttrWorkKey         = "workKey"
	AttrEffectProvider  = "provider"
	AttrEffectOperation = "operation"
	AttrIdempotent      = "idempotent"
	AttrHashVersion     = "hashVersion"
	AttrClaimToken      = "claimToken"
	AttrCallExpiresAt   = "callExpiresAt"
	AttrWorkAttempt     = "workAttempt"
	AttrWorkLease       = "workLease"
	AttrCalls           = "calls"
	AttrProviderRef     = "providerRef"
	AttrEffectResult    = "result"
	AttrLastError       = "lastError"
	AttrCreatedAt       = "createdAt"
	AttrUnknownAt       = "unknownAt"
	AttrCommittedAt     = "committedAt"
	AttrResolution      = "resolution"
	AttrResolvedAt      = "resolvedAt"
	AttrResolvedBy      = "resolvedBy"
	AttrResolveReason   = "resolveReason"
)
