package cds

import (
	"testing"

	"google.golang.org/protobuf/types/known/wrapperspb"
	networking "istio.io/api/networking/v1alpha3"
)

// TestGRPCOutlier: the request volume of a proxyless client's
// failure-percentage ejection is the smallest consecutive error count
// Istio's fields give (5 when consecutive5xxErrors is unset); no count,
// no ejection.
func TestGRPCOutlier(t *testing.T) {
	u := wrapperspb.UInt32
	tests := []struct {
		name string
		od   *networking.OutlierDetection
		want uint32 // request volume; 0: no outlier_detection
	}{
		{"unset: Istio's default 5", &networking.OutlierDetection{}, 5},
		{"consecutive5xxErrors", &networking.OutlierDetection{Consecutive_5XxErrors: u(3)}, 3},
		{"consecutive5xxErrors 0 turns it off", &networking.OutlierDetection{Consecutive_5XxErrors: u(0)}, 0},
		//lint:ignore SA1019 deprecated field
		{"deprecated consecutiveErrors", &networking.OutlierDetection{ConsecutiveErrors: 4}, 4},
		//lint:ignore SA1019 deprecated field
		{"consecutive5xxErrors wins over consecutiveErrors", &networking.OutlierDetection{Consecutive_5XxErrors: u(8), ConsecutiveErrors: 2}, 8},
		{"gateway errors lower", &networking.OutlierDetection{Consecutive_5XxErrors: u(7), ConsecutiveGatewayErrors: u(2)}, 2},
		{"gateway errors with 5xx off", &networking.OutlierDetection{Consecutive_5XxErrors: u(0), ConsecutiveGatewayErrors: u(6)}, 6},
		{"local origin failures", &networking.OutlierDetection{ConsecutiveLocalOriginFailures: u(1), SplitExternalLocalOriginErrors: true}, 1},
		{"local origin failures, not split", &networking.OutlierDetection{ConsecutiveLocalOriginFailures: u(1)}, 5},
	}
	for _, tt := range tests {
		got := grpcOutlier(tt.od)
		if tt.want == 0 {
			if got != nil {
				t.Errorf("%s: %v, want none", tt.name, got)
			}
			continue
		}
		if got.GetFailurePercentageRequestVolume().GetValue() != tt.want || got.GetEnforcingFailurePercentage().GetValue() != 100 ||
			got.GetFailurePercentageThreshold().GetValue() != grpcFailurePercent || got.GetFailurePercentageMinimumHosts().GetValue() != 1 ||
			got.GetEnforcingSuccessRate() == nil || got.GetEnforcingSuccessRate().GetValue() != 0 {
			t.Errorf("%s: %v, want failure-percentage ejection over %d RPCs", tt.name, got, tt.want)
		}
	}
}
