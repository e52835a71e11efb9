package rbac

import (
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"skiff/server/auth"
)

// API groups the bootstrap policy refers to.
const (
	coreGroup           = ""
	appsGroup           = "apps"
	authenticationGroup = "authentication.k8s.io"
	authorizationGroup  = "authorization.k8s.io"
	autoscalingGroup    = "autoscaling"
	batchGroup          = "batch"
	certificatesGroup   = "certificates.k8s.io"
	coordinationGroup   = "coordination.k8s.io"
	discoveryGroup      = "discovery.k8s.io"
	eventsGroup         = "events.k8s.io"
	extensionsGroup     = "extensions"
	networkingGroup     = "networking.k8s.io"
	nodeGroup           = "node.k8s.io"
	policyGroup         = "policy"
	resourceGroup       = "resource.k8s.io"
	storageGroup        = "storage.k8s.io"
)

// Labels and annotations upstream puts on its bootstrap policy; tools and
// the reconciler recognise the defaults by them.
const (
	BootstrapLabelKey   = "kubernetes.io/bootstrapping"
	BootstrapLabelValue = "rbac-defaults"
	AggregateToAdmin    = "rbac.authorization.k8s.io/aggregate-to-admin"
	AggregateToEdit     = "rbac.authorization.k8s.io/aggregate-to-edit"
	AggregateToView     = "rbac.authorization.k8s.io/aggregate-to-view"
)

// Well-known identities of the built-in components.
const (
	UserKubeScheduler         = "system:kube-scheduler"
	UserKubeControllerManager = "system:kube-controller-manager"
	UserKubeProxy             = "system:kube-proxy"
	GroupMonitoring           = "system:monitoring"
)

func readVerbs() []string { return []string{"get", "list", "watch"} }
func writeVerbs() []string {
	return []string{"create", "update", "patch", "delete", "deletecollection"}
}
func readWriteVerbs() []string {
	return append(readVerbs(), writeVerbs()...)
}
func verbs(v ...string) []string { return v }

// rule grants verbs on resources ("res" or "res/sub") in one API group.
func rule(verbs []string, group string, resources ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: verbs, APIGroups: []string{group}, Resources: resources}
}

// named narrows r to the given object names.
func named(r rbacv1.PolicyRule, names ...string) rbacv1.PolicyRule {
	r.ResourceNames = names
	return r
}

// inGroups widens r to further API groups serving the same resources.
func inGroups(r rbacv1.PolicyRule, groups ...string) rbacv1.PolicyRule {
	r.APIGroups = append(slices.Clone(r.APIGroups), groups...)
	return r
}

func urlRule(verbs []string, urls ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: verbs, NonResourceURLs: urls}
}

// eventsRule lets a component record events through either events API.
func eventsRule() rbacv1.PolicyRule {
	return inGroups(rule(verbs("create", "update", "patch"), coreGroup, "events"), eventsGroup)
}

// bootstrapMeta labels and annotates a bootstrap object so the reconciler
// keeps it up to date (autoupdate) and users can tell it apart.
func bootstrapMeta(name, namespace string, extraLabels map[string]string) metav1.ObjectMeta {
	labels := map[string]string{BootstrapLabelKey: BootstrapLabelValue}
	for k, v := range extraLabels {
		labels[k] = v
	}
	return metav1.ObjectMeta{
		Name:        name,
		Namespace:   namespace,
		Labels:      labels,
		Annotations: map[string]string{rbacv1.AutoUpdateAnnotationKey: "true"},
	}
}

func clusterRole(name string, rules ...rbacv1.PolicyRule) rbacv1.ClusterRole {
	return rbacv1.ClusterRole{ObjectMeta: bootstrapMeta(name, "", nil), Rules: rules}
}

// aggregatedRole is a ClusterRole whose rules the aggregation controller
// fills from the roles carrying selectLabel; labels lets it feed a wider
// aggregated role in turn.
func aggregatedRole(name, selectLabel string, labels map[string]string) rbacv1.ClusterRole {
	return rbacv1.ClusterRole{
		ObjectMeta: bootstrapMeta(name, "", labels),
		AggregationRule: &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{
			{MatchLabels: map[string]string{selectLabel: "true"}},
		}},
	}
}

// BootstrapClusterRoles returns the ClusterRoles a new cluster starts with,
// freshly built on each call. admin, edit and view come without rules: the
// aggregation controller (see Aggregate) fills them from
// system:aggregate-to-admin|edit|view and any other role carrying the
// matching aggregate-to label, and view feeds edit which feeds admin.
func BootstrapClusterRoles() []rbacv1.ClusterRole {
	return []rbacv1.ClusterRole{
		clusterRole("cluster-admin", fullAuthority()...),
		clusterRole("system:discovery", urlRule(verbs("get"),
			"/livez", "/readyz", "/healthz", "/version", "/version/",
			"/openapi", "/openapi/*", "/api", "/api/*", "/apis", "/apis/*")),
		clusterRole("system:public-info-viewer", urlRule(verbs("get"),
			"/livez", "/readyz", "/healthz", "/version", "/version/")),
		// The service-account issuer's OIDC discovery; the slash-ended
		// forms are upstream's, for clients generated from old OpenAPI.
		clusterRole("system:service-account-issuer-discovery", urlRule(verbs("get"),
			"/.well-known/openid-configuration", "/.well-known/openid-configuration/",
			"/openid/v1/jwks", "/openid/v1/jwks/")),
		clusterRole("system:basic-user",
			rule(verbs("create"), authorizationGroup, "selfsubjectaccessreviews", "selfsubjectrulesreviews"),
			rule(verbs("create"), authenticationGroup, "selfsubjectreviews")),
		clusterRole("system:monitoring", urlRule(verbs("get"),
			"/metrics", "/metrics/slis", "/livez", "/readyz", "/healthz", "/livez/*", "/readyz/*", "/healthz/*")),
		clusterRole("system:auth-delegator",
			rule(verbs("create"), authenticationGroup, "tokenreviews"),
			rule(verbs("create"), authorizationGroup, "subjectaccessreviews")),

		aggregatedRole("admin", AggregateToAdmin, nil),
		aggregatedRole("edit", AggregateToEdit, map[string]string{AggregateToAdmin: "true"}),
		aggregatedRole("view", AggregateToView, map[string]string{AggregateToEdit: "true"}),
		{ObjectMeta: bootstrapMeta("system:aggregate-to-admin", "", map[string]string{AggregateToAdmin: "true"}), Rules: aggregateToAdminRules()},
		{ObjectMeta: bootstrapMeta("system:aggregate-to-edit", "", map[string]string{AggregateToEdit: "true"}), Rules: aggregateToEditRules()},
		{ObjectMeta: bootstrapMeta("system:aggregate-to-view", "", map[string]string{AggregateToView: "true"}), Rules: aggregateToViewRules()},

		clusterRole("system:kube-scheduler", schedulerRules()...),
		clusterRole("system:kube-controller-manager", controllerManagerRules()...),
		clusterRole("system:node", nodeRules()...),
		clusterRole("system:cluster-trust-bundle-discovery", rule(readVerbs(), certificatesGroup, "clustertrustbundles")),
		clusterRole("system:node-proxier", nodeProxierRules()...),
		clusterRole("system:node-bootstrapper",
			rule(verbs("create", "get", "list", "watch"), certificatesGroup, "certificatesigningrequests")),
		clusterRole("system:certificates.k8s.io:certificatesigningrequests:nodeclient",
			rule(verbs("create"), certificatesGroup, "certificatesigningrequests/nodeclient")),
		clusterRole("system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
			rule(verbs("create"), certificatesGroup, "certificatesigningrequests/selfnodeclient")),
	}
}

func clusterRoleBinding(role string, subjects ...rbacv1.Subject) rbacv1.ClusterRoleBinding {
	return rbacv1.ClusterRoleBinding{
		ObjectMeta: bootstrapMeta(role, "", nil),
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   subjects,
	}
}

func groupSubject(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: name}
}

func userSubject(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}
}

// BootstrapClusterRoleBindings returns the ClusterRoleBindings a new cluster
// starts with, each named after the ClusterRole it grants.
func BootstrapClusterRoleBindings() []rbacv1.ClusterRoleBinding {
	return []rbacv1.ClusterRoleBinding{
		clusterRoleBinding("cluster-admin", groupSubject(auth.GroupMasters)),
		// Discovery is for authenticated users only, as upstream has done
		// since 1.14; anonymous users get the public info below.
		clusterRoleBinding("system:discovery", groupSubject(auth.GroupAuthenticated)),
		clusterRoleBinding("system:basic-user", groupSubject(auth.GroupAuthenticated)),
		clusterRoleBinding("system:public-info-viewer",
			groupSubject(auth.GroupAuthenticated), groupSubject(auth.GroupUnauthenticated)),
		clusterRoleBinding("system:service-account-issuer-discovery", groupSubject(auth.GroupServiceAccounts)),
		// Service accounts read trust bundles, as upstream.
		clusterRoleBinding("system:cluster-trust-bundle-discovery", groupSubject(auth.GroupServiceAccounts)),
		clusterRoleBinding("system:monitoring", groupSubject(GroupMonitoring)),
		clusterRoleBinding("system:kube-scheduler", userSubject(UserKubeScheduler)),
		clusterRoleBinding("system:kube-controller-manager", userSubject(UserKubeControllerManager)),
		clusterRoleBinding("system:node-proxier", userSubject(UserKubeProxy)),
		// Upstream leaves this binding without subjects and lets its Node
		// authorizer limit each kubelet to its own node's objects. Until we
		// have a node authorizer the whole group gets the role, so any node
		// can read every secret and configmap; narrow this when it lands.
		clusterRoleBinding("system:node", groupSubject(auth.GroupNodes)),
	}
}

// BootstrapRoles returns the namespaced Roles a new cluster starts with.
// extension-apiserver-authentication-reader lets extension API servers
// (metrics-server and the like, which bind to it by name) read the
// client-CA configmap in kube-system.
func BootstrapRoles() []rbacv1.Role {
	return []rbacv1.Role{{
		ObjectMeta: bootstrapMeta("extension-apiserver-authentication-reader", "kube-system", nil),
		Rules: []rbacv1.PolicyRule{
			named(rule(readVerbs(), coreGroup, "configmaps"), "extension-apiserver-authentication"),
		},
	}}
}

// BootstrapRoleBindings returns the namespaced RoleBindings a new cluster
// starts with.
func BootstrapRoleBindings() []rbacv1.RoleBinding {
	return []rbacv1.RoleBinding{{
		ObjectMeta: bootstrapMeta("system::extension-apiserver-authentication-reader", "kube-system", nil),
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "extension-apiserver-authentication-reader"},
		Subjects:   []rbacv1.Subject{userSubject(UserKubeControllerManager), userSubject(UserKubeScheduler)},
	}}
}
