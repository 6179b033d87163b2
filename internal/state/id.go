package state

import "fmt"

// MaxIDLength is the longest atom id ValidID accepts.
const MaxIDLength = 64

// IDRule says, for people, which atom ids are accepted.
const IDRule = "an atom id is 1 to 64 characters: letters, digits, '.', '_' and '-', starting with a letter or a digit"

// ValidID checks that id may name a new atom: 1 to 64 ASCII letters, digits,
// '.', '_' and '-', starting with a letter or a digit (the regular expression
// ^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$). Ids end up in file names (agent logs),
// shell environments (AOT_ATOM_ID), commands people copy and YAML: a safe
// set keeps all of them plain. Files that already hold other ids still read;
// aot validate warns about them.
func ValidID(id string) error {
	if id == "" {
		return fmt.Errorf("the atom id is empty: %s", IDRule)
	}
	if len(id) > MaxIDLength {
		return fmt.Errorf("the atom id %q is %d characters long: %s", id, len(id), IDRule)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if alnum || i > 0 && (c == '.' || c == '_' || c == '-') {
			continue
		}
		if i == 0 && (c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("the atom id %q starts with %q: %s", id, c, IDRule)
		}
		return fmt.Errorf("the atom id %q holds %q: %s", id, []rune(id[i:])[0], IDRule)
	}
	return nil
}
