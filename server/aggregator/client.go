package aggregator

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
)

// apiServices reads and writes APIServices. The aggregator's own client:
// the generated clientset lives in kube-aggregator beside its server, and
// of that module only the API types are ours to use.
type apiServices struct {
	rest rest.Interface
}

var (
	apiServiceScheme = runtime.NewScheme()
	parameterCodec   = runtime.NewParameterCodec(apiServiceScheme)
)

func init() {
	// Only registration of the two types and the option kinds: cannot fail.
	if err := apiregistrationv1.AddToScheme(apiServiceScheme); err != nil {
		panic(err)
	}
}

func newAPIServices(cfg *rest.Config) (*apiServices, error) {
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &apiregistrationv1.SchemeGroupVersion
	c.APIPath = "/apis"
	c.ContentType = runtime.ContentTypeJSON
	c.NegotiatedSerializer = serializer.NewCodecFactory(apiServiceScheme).WithoutConversion()
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	rc, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("aggregator: APIService client: %w", err)
	}
	return &apiServices{rest: rc}, nil
}

func (c *apiServices) list(ctx context.Context, opts metav1.ListOptions) (*apiregistrationv1.APIServiceList, error) {
	out := &apiregistrationv1.APIServiceList{}
	err := c.rest.Get().Resource("apiservices").VersionedParams(&opts, parameterCodec).Do(ctx).Into(out)
	return out, err
}

func (c *apiServices) watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return c.rest.Get().Resource("apiservices").VersionedParams(&opts, parameterCodec).Watch(ctx)
}

func (c *apiServices) create(ctx context.Context, s *apiregistrationv1.APIService) (*apiregistrationv1.APIService, error) {
	out := &apiregistrationv1.APIService{}
	err := c.rest.Post().Resource("apiservices").Body(s).Do(ctx).Into(out)
	return out, err
}

func (c *apiServices) update(ctx context.Context, s *apiregistrationv1.APIService) (*apiregistrationv1.APIService, error) {
	out := &apiregistrationv1.APIService{}
	err := c.rest.Put().Resource("apiservices").Name(s.Name).Body(s).Do(ctx).Into(out)
	return out, err
}

func (c *apiServices) updateStatus(ctx context.Context, s *apiregistrationv1.APIService) (*apiregistrationv1.APIService, error) {
	out := &apiregistrationv1.APIService{}
	err := c.rest.Put().Resource("apiservices").Name(s.Name).SubResource("status").Body(s).Do(ctx).Into(out)
	return out, err
}

func (c *apiServices) delete(ctx context.Context, name string, uid string) error {
	opts := metav1.DeleteOptions{}
	if uid != "" {
		u := k8stypes.UID(uid)
		opts.Preconditions = &metav1.Preconditions{UID: &u}
	}
	return c.rest.Delete().Resource("apiservices").Name(name).Body(&opts).Do(ctx).Error()
}

// informer lists and watches every APIService.
func (c *apiServices) informer() cache.SharedIndexInformer {
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return c.list(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return c.watch(ctx, opts)
		},
	}
	return cache.NewSharedIndexInformer(lw, &apiregistrationv1.APIService{}, 0, cache.Indexers{})
}
