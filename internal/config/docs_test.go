package config

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
)

// Every configuration docs/configuration.md shows is one the components start from: it decodes
// strictly and validates (and the page shows one of each kind).
func TestDocsExamplesAreValid(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	for _, m := range regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(string(doc), -1) {
		data := []byte(m[1])
		var errs []string
		switch kind := regexp.MustCompile(`(?m)^kind: (\w+)`).FindStringSubmatch(m[1]); {
		case kind == nil:
			continue
		case kind[1] == configv1alpha1.ServerConfigurationKind:
			c := &configv1alpha1.ServerConfiguration{}
			if err = Decode(data, c); err == nil {
				configv1alpha1.SetDefaults_ServerConfiguration(c)
				errs = messages(ValidateServerConfiguration(c).ToAggregate())
			}
			kinds[kind[1]] = true
		case kind[1] == configv1alpha1.OperatorConfigurationKind:
			c := &configv1alpha1.OperatorConfiguration{}
			if err = Decode(data, c); err == nil {
				configv1alpha1.SetDefaults_OperatorConfiguration(c)
				errs = messages(ValidateOperatorConfiguration(c).ToAggregate())
			}
			kinds[kind[1]] = true
		default:
			c := &configv1alpha1.PanelConfiguration{}
			if err = Decode(data, c); err == nil {
				configv1alpha1.SetDefaults_PanelConfiguration(c)
				errs = messages(ValidatePanelConfiguration(c).ToAggregate())
			}
			kinds[kind[1]] = true
		}
		if err != nil || len(errs) > 0 {
			t.Errorf("docs/configuration.md shows a configuration no component starts from: %v %s\n%s", err, strings.Join(errs, "; "), data)
		}
	}
	if len(kinds) != 3 {
		t.Errorf("docs/configuration.md shows the kinds %v, want one example of each of the three", kinds)
	}
}

func messages(err error) []string {
	if err == nil {
		return nil
	}
	return []string{err.Error()}
}
