package storage

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"skiff/server/registry"
	"skiff/store"
)

func TestAPIError_StoreSentinels_MapToStatusCodes(t *testing.T) {
	res := &registry.Resource{Version: "v1", Name: "configmaps", Kind: "ConfigMap"}
	cases := []struct {
		name       string
		err        error
		code       int32
		retryAfter int32
	}{
		{"not found", store.ErrNotFound, http.StatusNotFound, 0},
		{"exists", store.ErrExists, http.StatusConflict, 0},
		{"conflict", store.ErrConflict, http.StatusConflict, 0},
		{"compacted", store.ErrCompacted, http.StatusGone, 0},
		{"unavailable (no quorum)", fmt.Errorf("raft: %w: no leader", store.ErrUnavailable), http.StatusServiceUnavailable, 1},
		{"deadline", context.DeadlineExceeded, http.StatusGatewayTimeout, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := APIError(tc.err, res, "cm1")
			st, ok := err.(apierrors.APIStatus)
			if !ok {
				t.Fatalf("APIError(%v) = %T, want an APIStatus", tc.err, err)
			}
			s := st.Status()
			if s.Code != tc.code {
				t.Fatalf("code = %d, want %d (%s)", s.Code, tc.code, s.Message)
			}
			var ra int32
			if s.Details != nil {
				ra = s.Details.RetryAfterSeconds
			}
			if ra != tc.retryAfter {
				t.Fatalf("retryAfterSeconds = %d, want %d", ra, tc.retryAfter)
			}
		})
	}
}
