//go:build linux

package main

import "testing"

func TestShellFor_EnvironmentNames_PicksShell(t *testing.T) {
	tests := []struct {
		name string
		env  []string
		want string
	}{
		{"empty environment runs ash", nil, ash},
		{"identifier names run ash", []string{"PATH=/bin", "HOME=/root", "_x1=a", "KUBERNETES_SERVICE_HOST=10.0.0.1"}, ash},
		{"value with dashes and equals runs ash", []string{"A=data-1=x"}, ash},
		{"dash in name runs bash", []string{"PATH=/bin", "data-1=value-1"}, bash},
		{"leading digit runs bash", []string{"1data=value-1"}, bash},
		{"symbol prefix runs bash", []string{"#@!data-1=value-1"}, bash},
		{"space in name runs bash", []string{"* +,-./0123456789=value-2"}, bash},
		{"empty name runs bash", []string{"=x"}, bash},
		{"entry without equals sign is judged by its whole text", []string{"data-1"}, bash},
		{"non-ASCII letter runs bash", []string{"é=1"}, bash},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := shellFor(tt.env); got != tt.want {
				t.Errorf("shellFor(%q) = %s, want %s", tt.env, got, tt.want)
			}
		})
	}
}
