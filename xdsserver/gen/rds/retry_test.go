package rds

import (
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	networking "istio.io/api/networking/v1alpha3"
)

// TestRetryAsIstiod: HTTPRetry maps as istiod's retry.ConvertPolicy:
// status codes in retryOn become retriable_status_codes (Envoy ignores
// a bare "503" in retry_on), a hashing route keeps no previous-hosts
// predicate, retryRemoteLocalities and backoff are honoured.
func TestRetryAsIstiod(t *testing.T) {
	p := retry(&networking.HTTPRetry{Attempts: 3, RetryOn: "503, connect-failure,gateway-error", RetryRemoteLocalities: wrapperspb.Bool(true),
		Backoff: durationpb.New(25 * time.Millisecond)}, false)
	if p.GetRetryOn() != "connect-failure,gateway-error,retriable-status-codes" || !slices.Equal(p.GetRetriableStatusCodes(), []uint32{503}) {
		t.Errorf("retry_on %q codes %v", p.GetRetryOn(), p.GetRetriableStatusCodes())
	}
	if p.GetRetryPriority().GetName() != "envoy.retry_priorities.previous_priorities" || p.GetRetryBackOff().GetBaseInterval().AsDuration() != 25*time.Millisecond {
		t.Errorf("priority %v backoff %v", p.GetRetryPriority(), p.GetRetryBackOff())
	}
	if len(p.GetRetryHostPredicate()) != 1 {
		t.Errorf("predicates %v, want previous hosts", p.GetRetryHostPredicate())
	}
	if h := retry(&networking.HTTPRetry{Attempts: 2}, true); len(h.GetRetryHostPredicate()) != 0 || h.GetHostSelectionRetryMaxAttempts() != 5 {
		t.Errorf("hashed: %v, want no predicate", h)
	}
	if h := retry(nil, true); len(h.GetRetryHostPredicate()) != 0 || h.GetNumRetries().GetValue() != 2 {
		t.Errorf("hashed default: %v", h)
	}
	if h := retry(&networking.HTTPRetry{Attempts: 2, RetryIgnorePreviousHosts: wrapperspb.Bool(true)}, true); len(h.GetRetryHostPredicate()) != 1 {
		t.Errorf("hashed, ignore previous hosts asked: %v", h)
	}
	if retry(&networking.HTTPRetry{Attempts: 0}, false) != nil {
		t.Error("zero attempts: want no policy")
	}
}
