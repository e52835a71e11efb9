package stream

import (
	"encoding/json"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PodLister lists the pods this node runs.
type PodLister interface {
	// NodePods returns copies of the pods the node runs, with the status
	// it last reported.
	NodePods() []corev1.Pod
}

// servePods answers GET /pods with a v1 PodList, as the kubelet does (what
// `kubectl get --raw /api/v1/nodes/NODE/proxy/pods` shows).
func (s *Server) servePods(w http.ResponseWriter, _ *http.Request) {
	list := corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}, Items: s.cfg.PodList.NodePods()}
	if list.Items == nil {
		list.Items = []corev1.Pod{}
	}
	b, err := json.Marshal(list)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}
