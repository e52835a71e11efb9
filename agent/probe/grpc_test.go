package probe

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	corev1 "k8s.io/api/core/v1"
)

func TestGRPCHealthProbe(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	go func() { _ = srv.Serve(ln) }()
	defer srv.Stop()
	port := int32(ln.Addr().(*net.TCPAddr).Port)
	svc := "db"
	tests := []struct {
		name   string
		status healthpb.HealthCheckResponse_ServingStatus
		want   Result
	}{
		{"serving-succeeds", healthpb.HealthCheckResponse_SERVING, Success},
		{"not-serving-fails", healthpb.HealthCheckResponse_NOT_SERVING, Failure},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hs.SetServingStatus(svc, tc.status)
			a := Action{GRPC: &corev1.GRPCAction{Port: port, Service: &svc}}
			if res, msg := Do(context.Background(), a, Target{PodIP: "127.0.0.1"}, nil, 2*time.Second); res != tc.want {
				t.Fatalf("%s %s", res, msg)
			}
		})
	}
}
