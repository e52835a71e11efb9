package main

import (
	"fmt"
	"os"
	"path/filepath"
	"text/tabwriter"

	"github.com/containerd/containerd/v2/client"
	"github.com/spf13/cobra"

	"skiff/runtime/images"
)

// newImagesCommand is `skiff images import|list`: images in the node's
// containerd, for air-gapped machines.
func newImagesCommand() *cobra.Command {
	var dataDir, endpoint string
	cmd := &cobra.Command{Use: "images", Short: "Import and list the node's container images"}
	cmd.PersistentFlags().StringVar(&dataDir, "data-dir", "/var/lib/skiff", "the node's data directory (its embedded containerd)")
	cmd.PersistentFlags().StringVar(&endpoint, "container-runtime-endpoint", "", "socket of the containerd the node uses (default: the embedded one)")
	open := func() (*images.Store, func(), error) {
		addr := trimUnix(endpoint)
		if addr == "" {
			addr = filepath.Join(dataDir, "agent", "containerd", "containerd.sock")
		}
		c, err := client.New(addr)
		if err != nil {
			return nil, nil, fmt.Errorf("containerd at %s (is the node running?): %w", addr, err)
		}
		s, err := images.New(images.Config{Client: c, Namespace: "skiff"})
		if err != nil {
			c.Close()
			return nil, nil, err
		}
		return s, func() { c.Close() }, nil
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "import FILE...",
		Short: "Import docker-archive or OCI tarballs (optionally gzip or zstd) into the running node",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, done, err := open()
			if err != nil {
				return err
			}
			defer done()
			for _, path := range args {
				f, err := os.Open(path)
				if err != nil {
					return err
				}
				imgs, err := s.Import(cmd.Context(), f)
				f.Close()
				if err != nil {
					return fmt.Errorf("%s: %w", path, err)
				}
				for _, img := range imgs {
					fmt.Fprintf(cmd.OutOrStdout(), "imported %s (%s)\n", img.Ref, img.ID)
				}
			}
			return nil
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "List the node's images",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			s, done, err := open()
			if err != nil {
				return err
			}
			defer done()
			imgs, err := s.List(cmd.Context())
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "IMAGE\tID\tSIZE")
			for _, img := range imgs {
				fmt.Fprintf(w, "%s\t%s\t%d\n", img.Ref, shortID(img.ID), img.Size)
			}
			return w.Flush()
		},
	})
	return cmd
}

func trimUnix(addr string) string {
	if len(addr) > 7 && addr[:7] == "unix://" {
		return addr[7:]
	}
	return addr
}

func shortID(id string) string {
	if len(id) > 19 {
		return id[:19]
	}
	return id
}
