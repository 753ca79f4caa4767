package config

import "testing"

// TestKindTraits: the traits the pipeline and the serving layer ask of a
// kind are declared on its schema, and an unknown kind has none.
func TestKindTraits(t *testing.T) {
	var model, controllers []Kind
	for _, k := range Kinds() {
		if k.FeedsModel() {
			model = append(model, k)
		}
		if k.ControllersOnly() {
			controllers = append(controllers, k)
		}
		if k.FeedsModel() && k.ControllersOnly() {
			t.Errorf("%s: feeds the model and is read by controllers only", k)
		}
	}
	if len(model) != 2 || model[0] != ServiceEntry || model[1] != WorkloadEntry {
		t.Errorf("kinds that feed the model: %v, want [ServiceEntry WorkloadEntry]", model)
	}
	if len(controllers) != 1 || controllers[0] != WorkloadGroup {
		t.Errorf("kinds read by controllers only: %v, want [WorkloadGroup]", controllers)
	}
	if Kind("Nope").FeedsModel() || Kind("Nope").ControllersOnly() || MeshConfig.FeedsModel() {
		t.Error("an unknown kind has traits")
	}
}
