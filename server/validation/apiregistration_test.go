package validation

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
)

func remoteAPIServiceForTest() *apiregistrationv1.APIService {
	return defaulted(&apiregistrationv1.APIService{
		ObjectMeta: metav1.ObjectMeta{Name: "v1alpha1.wardle.example.com"},
		Spec: apiregistrationv1.APIServiceSpec{Group: "wardle.example.com", Version: "v1alpha1", CABundle: []byte("pem"),
			Service:              &apiregistrationv1.ServiceReference{Namespace: "ns", Name: "sample-api"},
			GroupPriorityMinimum: 2000, VersionPriority: 200},
	})
}

func TestValidateAPIService_Remote(t *testing.T) {
	runCreateCases(t, remoteAPIServiceForTest, []errCase[*apiregistrationv1.APIService]{
		{"name is version.group", func(s *apiregistrationv1.APIService) { s.Name = "wardle" },
			field.ErrorTypeInvalid, "metadata.name", "must be `spec.version+\".\"+spec.group`: \"v1alpha1.wardle.example.com\""},
		{"group is a DNS subdomain", func(s *apiregistrationv1.APIService) { s.Spec.Group, s.Name = "Wardle", "v1alpha1.Wardle" },
			field.ErrorTypeInvalid, "spec.group", ""},
		{"only v1 may lack a group", func(s *apiregistrationv1.APIService) { s.Spec.Group, s.Name = "", "v1alpha1." },
			field.ErrorTypeRequired, "spec.group", "only v1 may have an empty group and it better be legacy kube"},
		{"version is a DNS label", func(s *apiregistrationv1.APIService) { s.Spec.Version, s.Name = "V1", "V1.wardle.example.com" },
			field.ErrorTypeInvalid, "spec.version", ""},
		{"group priority in range", func(s *apiregistrationv1.APIService) { s.Spec.GroupPriorityMinimum = 20001 },
			field.ErrorTypeInvalid, "spec.groupPriorityMinimum", "must be positive and less than 20000"},
		{"version priority positive", func(s *apiregistrationv1.APIService) { s.Spec.VersionPriority = 0 },
			field.ErrorTypeInvalid, "spec.versionPriority", "must be positive and less than 1000"},
		{"service namespace required", func(s *apiregistrationv1.APIService) { s.Spec.Service.Namespace = "" },
			field.ErrorTypeRequired, "spec.service.namespace", ""},
		{"service name required", func(s *apiregistrationv1.APIService) { s.Spec.Service.Name = "" },
			field.ErrorTypeRequired, "spec.service.name", ""},
		{"port valid", func(s *apiregistrationv1.APIService) { p := int32(70000); s.Spec.Service.Port = &p },
			field.ErrorTypeInvalid, "spec.service.port", "port is not valid: must be between 1 and 65535, inclusive"},
		{"caBundle or insecure, not both", func(s *apiregistrationv1.APIService) { s.Spec.InsecureSkipTLSVerify = true },
			field.ErrorTypeInvalid, "spec.insecureSkipTLSVerify", "may not be true if caBundle is present"},
	})
}

func TestValidateAPIService_Local(t *testing.T) {
	local := func() *apiregistrationv1.APIService {
		return &apiregistrationv1.APIService{ObjectMeta: metav1.ObjectMeta{Name: "v1."},
			Spec: apiregistrationv1.APIServiceSpec{Version: "v1", GroupPriorityMinimum: 18000, VersionPriority: 1}}
	}
	runCreateCases(t, local, []errCase[*apiregistrationv1.APIService]{
		{"no caBundle", func(s *apiregistrationv1.APIService) { s.Spec.CABundle = []byte("x") },
			field.ErrorTypeInvalid, "spec.caBundle", "local APIServices may not have a caBundle"},
		{"no insecureSkipTLSVerify", func(s *apiregistrationv1.APIService) { s.Spec.InsecureSkipTLSVerify = true },
			field.ErrorTypeInvalid, "spec.insecureSkipTLSVerify", "local APIServices may not have insecureSkipTLSVerify"},
	})
}

func TestValidateAPIServiceUpdate_Status(t *testing.T) {
	runUpdateCases(t, func() *apiregistrationv1.APIService { return stored(remoteAPIServiceForTest()) }, []updateCase[*apiregistrationv1.APIService]{
		{name: "a condition of the e2e test", mutate: func(s *apiregistrationv1.APIService) {
			s.Status.Conditions = append(s.Status.Conditions, apiregistrationv1.APIServiceCondition{Type: "StatusUpdated", Status: "True", Reason: "E2E"})
		}},
		{name: "condition status True, False or Unknown", mutate: func(s *apiregistrationv1.APIService) {
			s.Status.Conditions = []apiregistrationv1.APIServiceCondition{{Type: apiregistrationv1.Available, Status: "Maybe"}}
		}, typ: field.ErrorTypeNotSupported, wantPath: "status.conditions[0].status"},
		{name: "the name stays", mutate: func(s *apiregistrationv1.APIService) { s.Name = "v1.other" },
			typ: field.ErrorTypeInvalid, wantPath: "metadata.name"},
	})
}

func TestDefaultAPIService_NoPort_443(t *testing.T) {
	s := remoteAPIServiceForTest()
	if s.Spec.Service.Port == nil || *s.Spec.Service.Port != 443 {
		t.Errorf("port = %v, want 443", s.Spec.Service.Port)
	}
}
