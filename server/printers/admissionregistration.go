package printers

import (
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func webhookColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		nameColumn(),
		column("Webhooks", "integer", "Webhooks indicates the number of webhooks registered in this configuration"),
		ageColumn(),
	}
}

func mutatingWebhookConfigurationPrinter() Printer {
	return Printer{Columns: webhookColumns(), Cells: mutatingWebhookConfigurationCells}
}

func mutatingWebhookConfigurationCells(obj runtime.Object, now time.Time) ([]interface{}, error) {
	c, err := typed[admissionregistrationv1.MutatingWebhookConfiguration](obj)
	if err != nil {
		return nil, err
	}
	return []interface{}{c.Name, int64(len(c.Webhooks)), translateTimestampSince(c.CreationTimestamp, now)}, nil
}

func validatingWebhookConfigurationPrinter() Printer {
	return Printer{Columns: webhookColumns(), Cells: validatingWebhookConfigurationCells}
}

func validatingWebhookConfigurationCells(obj runtime.Object, now time.Time) ([]interface{}, error) {
	c, err := typed[admissionregistrationv1.ValidatingWebhookConfiguration](obj)
	if err != nil {
		return nil, err
	}
	return []interface{}{c.Name, int64(len(c.Webhooks)), translateTimestampSince(c.CreationTimestamp, now)}, nil
}

func validatingAdmissionPolicyPrinter() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Validations", "integer", "Validations indicates the number of validation rules defined in this configuration"),
			column("ParamKind", "string", "ParamKind specifies the kind of resources used to parameterize this policy"),
			ageColumn(),
		},
		Cells: validatingAdmissionPolicyCells,
	}
}

func validatingAdmissionPolicyCells(obj runtime.Object, now time.Time) ([]interface{}, error) {
	p, err := typed[admissionregistrationv1.ValidatingAdmissionPolicy](obj)
	if err != nil {
		return nil, err
	}
	return []interface{}{p.Name, int64(len(p.Spec.Validations)), paramKindCell(p.Spec.ParamKind), translateTimestampSince(p.CreationTimestamp, now)}, nil
}

func validatingAdmissionPolicyBindingPrinter() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("PolicyName", "string", "PolicyName indicates the policy definition which the policy binding binded to"),
			column("ParamRef", "string", "ParamRef indicates the param resource which sets the configration param"),
			ageColumn(),
		},
		Cells: validatingAdmissionPolicyBindingCells,
	}
}

func validatingAdmissionPolicyBindingCells(obj runtime.Object, now time.Time) ([]interface{}, error) {
	b, err := typed[admissionregistrationv1.ValidatingAdmissionPolicyBinding](obj)
	if err != nil {
		return nil, err
	}
	return []interface{}{b.Name, b.Spec.PolicyName, paramRefCell(b.Spec.ParamRef), translateTimestampSince(b.CreationTimestamp, now)}, nil
}

// paramRefCell is a binding's ParamRef column.
func paramRefCell(pr *admissionregistrationv1.ParamRef) string {
	switch {
	case pr == nil:
		return "<unset>"
	case pr.Name != "" && pr.Namespace != "":
		return pr.Namespace + "/" + pr.Name
	case pr.Name != "":
		// The param may be cluster-scoped; that cannot be told here.
		return "*/" + pr.Name
	case pr.Selector != nil:
		return pr.Selector.String()
	}
	return "<unset>"
}

func paramKindCell(pk *admissionregistrationv1.ParamKind) string {
	if pk == nil {
		return "<unset>"
	}
	return pk.APIVersion + "/" + pk.Kind
}

func mutatingAdmissionPolicyPrinter() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Mutations", "integer", "Mutation indicates the number of mutations rules defined in this configuration"),
			column("ParamKind", "string", "ParamKind specifies the kind of resources used to parameterize this policy"),
			ageColumn(),
		},
		Cells: func(obj runtime.Object, now time.Time) ([]interface{}, error) {
			p, err := typed[admissionregistrationv1.MutatingAdmissionPolicy](obj)
			if err != nil {
				return nil, err
			}
			return []interface{}{p.Name, int64(len(p.Spec.Mutations)), paramKindCell(p.Spec.ParamKind), translateTimestampSince(p.CreationTimestamp, now)}, nil
		},
	}
}

func mutatingAdmissionPolicyBindingPrinter() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("PolicyName", "string", "PolicyName indicates the policy definition which the policy binding binded to"),
			column("ParamRef", "string", "ParamRef indicates the param resource which sets the configuration param"),
			ageColumn(),
		},
		Cells: func(obj runtime.Object, now time.Time) ([]interface{}, error) {
			b, err := typed[admissionregistrationv1.MutatingAdmissionPolicyBinding](obj)
			if err != nil {
				return nil, err
			}
			return []interface{}{b.Name, b.Spec.PolicyName, paramRefCell(b.Spec.ParamRef), translateTimestampSince(b.CreationTimestamp, now)}, nil
		},
	}
}
