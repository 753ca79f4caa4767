package cds

import (
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/wrapperspb"
	networking "istio.io/api/networking/v1alpha3"
)

// TestSidecarOutlier pins Envoy's outlier detection to istiod's
// applyOutlierDetection (pilot/pkg/networking/core/cluster_traffic_policy.go):
// an unset error count leaves Envoy's default (5, enforced), the
// deprecated consecutiveErrors is ignored, local-origin failures count
// only with split errors, and the panic threshold is always minHealthPercent.
func TestSidecarOutlier(t *testing.T) {
	u := wrapperspb.UInt32
	tests := []struct {
		name string
		od   *networking.OutlierDetection
		want string // protojson of Cluster{outlier_detection, common_lb_config}
	}{
		{"unset leaves Envoy's defaults", &networking.OutlierDetection{},
			`{"commonLbConfig":{"healthyPanicThreshold":{}},"outlierDetection":{"enforcingSuccessRate":0}}`},
		{"5xx errors enforced", &networking.OutlierDetection{Consecutive_5XxErrors: u(3)},
			`{"commonLbConfig":{"healthyPanicThreshold":{}},"outlierDetection":{"consecutive5xx":3,"enforcingConsecutive5xx":100,"enforcingSuccessRate":0}}`},
		{"5xx 0 turns it off", &networking.OutlierDetection{Consecutive_5XxErrors: u(0)},
			`{"commonLbConfig":{"healthyPanicThreshold":{}},"outlierDetection":{"consecutive5xx":0,"enforcingConsecutive5xx":0,"enforcingSuccessRate":0}}`},
		//lint:ignore SA1019 deprecated field
		{"deprecated consecutiveErrors ignored", &networking.OutlierDetection{ConsecutiveErrors: 4},
			`{"commonLbConfig":{"healthyPanicThreshold":{}},"outlierDetection":{"enforcingSuccessRate":0}}`},
		{"gateway errors", &networking.OutlierDetection{ConsecutiveGatewayErrors: u(2), MaxEjectionPercent: 30},
			`{"commonLbConfig":{"healthyPanicThreshold":{}},"outlierDetection":{"consecutiveGatewayFailure":2,"enforcingConsecutiveGatewayFailure":100,"enforcingSuccessRate":0,"maxEjectionPercent":30}}`},
		{"local origin without split ignored", &networking.OutlierDetection{ConsecutiveLocalOriginFailures: u(2)},
			`{"commonLbConfig":{"healthyPanicThreshold":{}},"outlierDetection":{"enforcingSuccessRate":0}}`},
		{"local origin with split", &networking.OutlierDetection{ConsecutiveLocalOriginFailures: u(2), SplitExternalLocalOriginErrors: true, MinHealthPercent: 40},
			`{"commonLbConfig":{"healthyPanicThreshold":{"value":40}},"outlierDetection":{"consecutiveLocalOriginFailure":2,"enforcingConsecutiveLocalOriginFailure":100,"enforcingLocalOriginSuccessRate":0,"enforcingSuccessRate":0,"splitExternalLocalOriginErrors":true}}`},
	}
	for _, tt := range tests {
		c := &clusterv3.Cluster{}
		applyOutlier(c, tt.od)
		got, err := protojson.MarshalOptions{}.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		var want clusterv3.Cluster
		if err := protojson.Unmarshal([]byte(tt.want), &want); err != nil {
			t.Fatalf("%s: bad want: %v", tt.name, err)
		}
		wantJSON, _ := protojson.MarshalOptions{}.Marshal(&want)
		if string(got) != string(wantJSON) {
			t.Errorf("%s:\n got %s\nwant %s", tt.name, got, wantJSON)
		}
	}
}
