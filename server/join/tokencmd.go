package join

import (
	"errors"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// DefaultKubeconfig is where `skiff server` writes the admin kubeconfig.
const DefaultKubeconfig = "/etc/skiff/skiff.yaml"

// TokenCommand is `skiff token create|list|delete`: extra join tokens kept
// as bootstrap-token Secrets beside the server token. It talks to the API
// with --kubeconfig (default $KUBECONFIG, else /etc/skiff/skiff.yaml).
func TokenCommand() *cobra.Command {
	var kubeconfig string
	cmd := &cobra.Command{Use: "token", Short: "Manage extra join tokens"}
	cmd.PersistentFlags().StringVar(&kubeconfig, "kubeconfig", "", "admin kubeconfig (default $KUBECONFIG, else "+DefaultKubeconfig+")")
	var ttl time.Duration
	var description string
	create := &cobra.Command{
		Use: "create", Short: "Create a join token and print it", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, caPEM, err := adminClient(kubeconfig)
			if err != nil {
				return err
			}
			tok, err := CreateToken(cmd.Context(), c, caPEM, ttl, description)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), tok)
			return nil
		},
	}
	create.Flags().DurationVar(&ttl, "ttl", 24*time.Hour, "how long the token is valid (0: forever)")
	create.Flags().StringVar(&description, "description", "", "what the token is for")
	list := &cobra.Command{
		Use: "list", Short: "List join tokens", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, _, err := adminClient(kubeconfig)
			if err != nil {
				return err
			}
			tokens, err := ListTokens(cmd.Context(), c)
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 8, 3, ' ', 0)
			fmt.Fprintln(w, "TOKEN\tTTL\tEXPIRES\tDESCRIPTION")
			for _, t := range tokens {
				left, expires := "<forever>", "<never>"
				if !t.Expires.IsZero() {
					expires = t.Expires.Format(time.RFC3339)
					left = "<expired>"
					if d := time.Until(t.Expires); d > 0 {
						left = d.Round(time.Second).String()
					}
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", t.ID, left, expires, t.Description)
			}
			return w.Flush()
		},
	}
	del := &cobra.Command{
		Use: "delete ID|TOKEN...", Short: "Delete join tokens", Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, _, err := adminClient(kubeconfig)
			if err != nil {
				return err
			}
			var errs []error
			for _, a := range args {
				if err := DeleteToken(cmd.Context(), c, a); err != nil {
					errs = append(errs, err)
					continue
				}
				fmt.Fprintf(cmd.OutOrStdout(), "token %s deleted\n", a)
			}
			return errors.Join(errs...)
		},
	}
	cmd.AddCommand(create, list, del)
	return cmd
}

// adminClient loads the kubeconfig and returns a client and the CA it
// trusts (whose hash goes into new tokens).
func adminClient(path string) (kubernetes.Interface, []byte, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if path != "" {
		rules.ExplicitPath = path
	} else if os.Getenv(clientcmd.RecommendedConfigPathEnvVar) == "" {
		rules.ExplicitPath = DefaultKubeconfig
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
	if err != nil {
		return nil, nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	caPEM, err := caOf(cfg)
	if err != nil {
		return nil, nil, err
	}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	return c, caPEM, nil
}

func caOf(cfg *rest.Config) ([]byte, error) {
	if len(cfg.CAData) > 0 {
		return cfg.CAData, nil
	}
	if cfg.CAFile != "" {
		data, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("read the kubeconfig's CA: %w", err)
		}
		return data, nil
	}
	return nil, errors.New("the kubeconfig names no certificate authority: cannot compute the token's CA hash")
}
