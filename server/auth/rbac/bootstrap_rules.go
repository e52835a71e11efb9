package rbac

import rbacv1 "k8s.io/api/rbac/v1"

// The rule tables below follow upstream's bootstrap policy
// (plugin/pkg/auth/authorizer/rbac/bootstrappolicy) for the resources we
// serve; where they differ the comment says why.

// aggregateToAdminRules is what admin has beyond edit: managing access
// within the namespace.
func aggregateToAdminRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		rule(verbs("create"), authorizationGroup, "localsubjectaccessreviews"),
		rule(readWriteVerbs(), rbacv1.GroupName, "roles", "rolebindings"),
	}
}

// aggregateToEditRules is what edit has beyond view: writing workloads and
// reading what view must not show (secrets, exec and proxy access). Write
// access to endpoints and endpointslices is left out as upstream has since
// CVE-2021-25740: it lets a user point a Service at arbitrary addresses.
func aggregateToEditRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		rule(readVerbs(), coreGroup, "pods/attach", "pods/proxy", "pods/exec", "pods/portforward", "secrets", "services/proxy"),
		rule(verbs("impersonate"), coreGroup, "serviceaccounts"),
		rule(writeVerbs(), coreGroup, "pods", "pods/attach", "pods/proxy", "pods/exec", "pods/portforward"),
		rule(verbs("create"), coreGroup, "pods/eviction"),
		rule(writeVerbs(), coreGroup, "replicationcontrollers", "replicationcontrollers/scale", "serviceaccounts",
			"services", "services/proxy", "persistentvolumeclaims", "configmaps", "secrets", "events"),
		rule(verbs("create"), coreGroup, "serviceaccounts/token"),
		rule(writeVerbs(), appsGroup, "statefulsets", "statefulsets/scale", "daemonsets",
			"deployments", "deployments/scale", "deployments/rollback", "replicasets", "replicasets/scale"),
		rule(writeVerbs(), autoscalingGroup, "horizontalpodautoscalers"),
		rule(writeVerbs(), batchGroup, "jobs", "cronjobs"),
		rule(writeVerbs(), extensionsGroup, "daemonsets", "deployments", "deployments/scale", "deployments/rollback",
			"ingresses", "replicasets", "replicasets/scale", "replicationcontrollers/scale", "networkpolicies"),
		rule(writeVerbs(), policyGroup, "poddisruptionbudgets"),
		rule(writeVerbs(), networkingGroup, "networkpolicies", "ingresses"),
		// Not in upstream's edit: applications in a namespace commonly run
		// their own leader election, and our policy grants the leases they
		// need with the rest of the workload.
		rule(writeVerbs(), coordinationGroup, "leases"),
	}
}

// aggregateToViewRules is read-only access to everything in a namespace
// except secrets and what could reveal them.
func aggregateToViewRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		rule(readVerbs(), coreGroup, "pods", "replicationcontrollers", "replicationcontrollers/scale", "serviceaccounts",
			"services", "services/status", "endpoints", "persistentvolumeclaims", "persistentvolumeclaims/status", "configmaps"),
		rule(readVerbs(), coreGroup, "limitranges", "resourcequotas", "bindings", "events",
			"pods/status", "resourcequotas/status", "namespaces/status", "replicationcontrollers/status", "pods/log"),
		// Reading namespaces at namespace scope means reading this one, which
		// tells users which namespaces they have access to.
		rule(readVerbs(), coreGroup, "namespaces"),
		rule(readVerbs(), discoveryGroup, "endpointslices"),
		rule(readVerbs(), appsGroup, "controllerrevisions",
			"statefulsets", "statefulsets/status", "statefulsets/scale",
			"daemonsets", "daemonsets/status",
			"deployments", "deployments/status", "deployments/scale",
			"replicasets", "replicasets/status", "replicasets/scale"),
		rule(readVerbs(), autoscalingGroup, "horizontalpodautoscalers", "horizontalpodautoscalers/status"),
		rule(readVerbs(), batchGroup, "jobs", "cronjobs", "cronjobs/status", "jobs/status"),
		rule(readVerbs(), extensionsGroup, "daemonsets", "daemonsets/status", "deployments", "deployments/scale", "deployments/status",
			"ingresses", "ingresses/status", "replicasets", "replicasets/scale", "replicasets/status", "replicationcontrollers/scale",
			"networkpolicies"),
		rule(readVerbs(), policyGroup, "poddisruptionbudgets", "poddisruptionbudgets/status"),
		rule(readVerbs(), networkingGroup, "networkpolicies", "ingresses", "ingresses/status"),
		// Not in upstream's view; the counterpart of the leases rule in edit.
		rule(readVerbs(), coordinationGroup, "leases"),
	}
}

func schedulerRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		eventsRule(),
		// Leader election.
		rule(verbs("create"), coordinationGroup, "leases"),
		named(rule(verbs("get", "update"), coordinationGroup, "leases"), "kube-scheduler"),
		rule(readVerbs(), coreGroup, "nodes", "namespaces"),
		rule(verbs("get", "list", "watch", "delete"), coreGroup, "pods"),
		rule(verbs("create"), coreGroup, "pods/binding", "bindings"),
		rule(verbs("patch", "update"), coreGroup, "pods/status"),
		// What selects pods, for spreading.
		rule(readVerbs(), coreGroup, "services", "replicationcontrollers"),
		inGroups(rule(readVerbs(), appsGroup, "replicasets"), extensionsGroup),
		rule(readVerbs(), appsGroup, "statefulsets"),
		// What applies to pods: disruption budgets (preemption) and volumes.
		rule(readVerbs(), policyGroup, "poddisruptionbudgets"),
		rule(readVerbs(), coreGroup, "persistentvolumeclaims", "persistentvolumes"),
		rule(readVerbs(), storageGroup, "csinodes", "csidrivers", "csistoragecapacities"),
		// Delegated authentication and authorization of its own endpoints.
		rule(verbs("create"), authenticationGroup, "tokenreviews"),
		rule(verbs("create"), authorizationGroup, "subjectaccessreviews"),
	}
}

// controllerManagerRules add up what upstream grants its individual
// controllers (system:controller:* roles), because our controllers run in
// one process under one identity. It is not "*" on "*" so that the list
// shows what controllers actually do (no impersonate, no bind, no creating
// RBAC objects), but it is close to cluster-admin in power all the same:
// update plus escalate on clusterroles lets it rewrite any ClusterRole, as
// upstream's aggregation controller can.
func controllerManagerRules() []rbacv1.PolicyRule {
	create := verbs("create")
	return []rbacv1.PolicyRule{
		// The namespace controller deletes everything in a dying namespace
		// and the garbage collector reads, patches and deletes owners and
		// dependents of any kind, custom resources included; status updates
		// of every other controller fall under the same verbs.
		rule(verbs("get", "list", "watch", "update", "patch", "delete", "deletecollection"), rbacv1.APIGroupAll, rbacv1.ResourceAll),
		rule(create, coreGroup, "pods", "pods/binding", "pods/eviction", "bindings", "endpoints", "endpoints/restricted",
			"configmaps", "secrets", "serviceaccounts", "serviceaccounts/token",
			"persistentvolumes", "persistentvolumeclaims", "nodes", "namespaces"),
		rule(create, appsGroup, "deployments", "replicasets", "controllerrevisions"),
		rule(create, batchGroup, "jobs"),
		rule(create, discoveryGroup, "endpointslices"),
		rule(create, coordinationGroup, "leases"),
		rule(create, storageGroup, "volumeattachments"),
		rule(create, resourceGroup, "resourceclaims"),
		rule(create, authenticationGroup, "tokenreviews"),
		rule(create, authorizationGroup, "subjectaccessreviews"),
		eventsRule(),
		// The aggregation controller writes rules into admin, edit and view
		// that it need not hold itself.
		rule(verbs("escalate"), rbacv1.GroupName, "clusterroles"),
		// The CSR approver approves kubelet client certificates; the signer
		// signs for the built-in signers.
		named(rule(verbs("approve"), certificatesGroup, "signers"), "kubernetes.io/kube-apiserver-client-kubelet"),
		named(rule(verbs("sign"), certificatesGroup, "signers"),
			"kubernetes.io/kube-apiserver-client", "kubernetes.io/kube-apiserver-client-kubelet",
			"kubernetes.io/kubelet-serving", "kubernetes.io/legacy-unknown"),
	}
}

// nodeRules are what a kubelet needs. Upstream narrows most of them to the
// kubelet's own node with its Node authorizer and NodeRestriction admission;
// see the system:node binding.
func nodeRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		rule(verbs("create"), authenticationGroup, "tokenreviews"),
		rule(verbs("create"), authorizationGroup, "subjectaccessreviews", "localsubjectaccessreviews"),
		rule(readVerbs(), coreGroup, "services"),
		rule(verbs("create", "get", "list", "watch"), coreGroup, "nodes"),
		rule(verbs("update", "patch"), coreGroup, "nodes/status"),
		rule(verbs("update", "patch"), coreGroup, "nodes"),
		rule(verbs("create", "update", "patch"), coreGroup, "events"),
		rule(readVerbs(), coreGroup, "pods"),
		// Mirror pods for static pods.
		rule(verbs("create", "delete"), coreGroup, "pods"),
		rule(verbs("update", "patch"), coreGroup, "pods/status"),
		rule(verbs("create"), coreGroup, "pods/eviction"),
		rule(readVerbs(), coreGroup, "secrets", "configmaps"),
		rule(verbs("get"), coreGroup, "persistentvolumeclaims", "persistentvolumes"),
		rule(verbs("get", "update", "patch"), coreGroup, "persistentvolumeclaims/status"),
		// Upstream grants only get; list and watch let a node agent that
		// also does service proxying run under the node identity.
		rule(readVerbs(), coreGroup, "endpoints"),
		rule(verbs("create", "get", "list", "watch"), certificatesGroup, "certificatesigningrequests"),
		// clusterTrustBundle and podCertificate projected volumes; the node
		// authorizer and the Certificates admission narrow the requests.
		rule(readVerbs(), certificatesGroup, "clustertrustbundles"),
		rule(verbs("create", "get", "list", "watch"), certificatesGroup, "podcertificaterequests"),
		rule(verbs("get"), coreGroup, "serviceaccounts"),
		rule(verbs("get", "create", "update", "patch", "delete"), coordinationGroup, "leases"),
		rule(verbs("create"), coreGroup, "serviceaccounts/token"),
		rule(verbs("get"), storageGroup, "volumeattachments"),
		rule(readVerbs(), storageGroup, "csidrivers"),
		rule(verbs("get", "create", "update", "patch", "delete"), storageGroup, "csinodes"),
		rule(readVerbs(), nodeGroup, "runtimeclasses"),
	}
}

func nodeProxierRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		rule(verbs("list", "watch"), coreGroup, "services", "endpoints"),
		rule(verbs("list", "watch"), discoveryGroup, "endpointslices"),
		rule(readVerbs(), coreGroup, "nodes"),
		eventsRule(),
	}
}
