package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"skiff/server/join"
	"skiff/server/members"
)

// newMembersCommand is `skiff server members list|remove`: the servers of
// an HA cluster (the members of its Raft store), through the API's
// /v1-skiff/members with an admin kubeconfig (--kubeconfig, else
// $KUBECONFIG, else /etc/skiff/skiff.yaml).
func newMembersCommand() *cobra.Command {
	var kubeconfig string
	cmd := &cobra.Command{
		Use:   "members",
		Short: "List and remove the servers of an HA cluster (the members of its embedded store)",
	}
	cmd.PersistentFlags().StringVar(&kubeconfig, "kubeconfig", "", "admin kubeconfig (default $KUBECONFIG, else "+join.DefaultKubeconfig+")")
	list := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the cluster's servers",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := membersClient(kubeconfig)
			if err != nil {
				return err
			}
			raw, err := c.Get().AbsPath(members.Path).Do(cmd.Context()).Raw()
			if err != nil {
				return fmt.Errorf("list members: %w", membersError(err))
			}
			var ml members.MemberList
			if err := json.Unmarshal(raw, &ml); err != nil {
				return fmt.Errorf("list members: the server's answer: %w", err)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 8, 3, ' ', 0)
			fmt.Fprintln(w, "NAME\tADDRESS\tVOTER\tLEADER")
			for _, m := range ml.Members {
				fmt.Fprintf(w, "%s\t%s\t%t\t%t\n", m.Name, m.Address, m.Voter, m.Leader)
			}
			return w.Flush()
		},
	}
	remove := &cobra.Command{
		Use:     "remove NAME",
		Aliases: []string{"rm"},
		Short:   "Remove a server from the cluster (stop it first; it must join afresh to come back)",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if name == "" || strings.Contains(name, "/") {
				return fmt.Errorf("invalid member name %q", name)
			}
			c, err := membersClient(kubeconfig)
			if err != nil {
				return err
			}
			if err := c.Delete().AbsPath(members.Path, name).Do(cmd.Context()).Error(); err != nil {
				return membersError(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "member %s removed\n", name)
			return nil
		},
	}
	cmd.AddCommand(list, remove)
	return cmd
}

// membersClient is a REST client of the API server the admin kubeconfig
// at path names ("": $KUBECONFIG, else join.DefaultKubeconfig). Failures
// come back as *apierrors.StatusError carrying the server's Status.
func membersClient(path string) (rest.Interface, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = membersKubeconfigPath(path, os.Getenv)
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	cfg.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	return rest.UnversionedRESTClientFor(cfg)
}

// membersKubeconfigPath is the kubeconfig to load as `skiff token` picks
// it: the flag's, else none ("": the loading rules read $KUBECONFIG), else
// join.DefaultKubeconfig.
func membersKubeconfigPath(flag string, getenv func(string) string) string {
	switch {
	case flag != "":
		return flag
	case getenv(clientcmd.RecommendedConfigPathEnvVar) != "":
		return ""
	}
	return join.DefaultKubeconfig
}

// membersError explains a 404 that is not about a member: the server does
// not serve the members API (it is a single server, not an HA one).
func membersError(err error) error {
	var se *apierrors.StatusError
	if errors.As(err, &se) && se.ErrStatus.Code == 404 && (se.ErrStatus.Details == nil || se.ErrStatus.Details.Kind != "members") {
		return errors.New("the server does not serve " + members.Path + ": is it an HA server (with an embedded cluster store)?")
	}
	return err
}
