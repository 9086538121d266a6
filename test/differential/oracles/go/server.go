// Go oracle: how a typical net/http handler reads a request.
//
// An http.ServeMux with a single "/" pattern, so the mux's own path cleaning (301 to the cleaned
// path for "//", "/./", "/../") happens before our handler runs. The handler then matches each
// route's template against r.URL.Path, which Go has already percent-decoded ("%2F" becomes "/"
// and so splits a segment), the way hand-written Go routers do.
//
// The body is read the way a typed Go handler reads it: json.NewDecoder(r.Body).Decode into a
// struct whose fields are the route's body_fields (`json:"<name>"`, type any), whatever the
// Content-Type says. That brings in encoding/json's own rules: member names match fields
// case-insensitively (with Unicode folding: "ſ" U+017F matches "s", "K" U+212A matches "k"), the
// last of several matching members wins, members that match no field are dropped, and anything
// after the first JSON value is never read. When the body does not decode, the handler falls back
// to r.FormValue (form or multipart body values before query values, as Go merges them).
//
// Standard library only: it runs with Debian's golang-go and no module downloads.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
)

type routeSpec struct {
	Name       string   `json:"name"`
	Method     string   `json:"method"`
	Path       string   `json:"path"`
	BodyFields []string `json:"body_fields"`
}

type route struct {
	spec     routeSpec
	segments []string // template segments; "{x}" captures one non-empty segment
	body     reflect.Type
}

// bodyType builds the struct a Go handler would declare for the route's body: one exported field
// per body field, tagged with the member name, typed any (so JSON numbers arrive as float64,
// objects as map[string]any, exactly as encoding/json decodes into an interface).
func bodyType(fields []string) reflect.Type {
	sf := make([]reflect.StructField, 0, len(fields))
	for i, name := range fields {
		sf = append(sf, reflect.StructField{
			Name: "F" + strconv.Itoa(i),
			Type: reflect.TypeOf((*any)(nil)).Elem(),
			Tag:  reflect.StructTag("json:" + strconv.Quote(name)),
		})
	}
	return reflect.StructOf(sf)
}

func splitPath(p string) []string {
	return strings.Split(strings.TrimPrefix(p, "/"), "/")
}

func isCapture(seg string) bool {
	return len(seg) > 2 && strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}")
}

// match compares the template with the decoded path segment by segment: literals exactly (Go's
// hand-written routers are case-sensitive), captures as one non-empty segment.
func (rt *route) match(segs []string) (map[string]string, bool) {
	if len(segs) != len(rt.segments) {
		return nil, false
	}
	captures := map[string]string{}
	for i, t := range rt.segments {
		if isCapture(t) {
			if segs[i] == "" {
				return nil, false
			}
			captures[t[1:len(t)-1]] = segs[i]
		} else if t != segs[i] {
			return nil, false
		}
	}
	return captures, true
}

// readBody returns the body fields the action would read, or nil when it reads none.
func readBody(rt *route, r *http.Request) any {
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		return nil
	}
	v := reflect.New(rt.body)
	if err := json.NewDecoder(bytes.NewReader(raw)).Decode(v.Interface()); err == nil {
		out := map[string]any{}
		for i, name := range rt.spec.BodyFields {
			// A field typed any holds nil both when the member is absent and when it is JSON
			// null: the handler cannot tell them apart, so neither is reported.
			if f := v.Elem().Field(i).Interface(); f != nil {
				out[name] = f
			}
		}
		return out
	}
	// Not JSON: the handler falls back to r.FormValue, which parses the query and, for POST, PUT
	// and PATCH, a urlencoded or multipart body (body values listed first).
	r.Body = io.NopCloser(bytes.NewReader(raw))
	out := map[string]any{}
	for _, name := range rt.spec.BodyFields {
		value := r.FormValue(name)
		if _, present := r.Form[name]; present {
			out[name] = value
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func main() {
	removeSelf := flag.Bool("remove-self", false, "unlink this executable and its (then empty) directory (run.sh builds into a fresh one)")
	flag.Parse()
	if *removeSelf {
		// Linux keeps running a binary whose file is gone, so nothing is left behind however the
		// server is stopped.
		if exe, err := os.Executable(); err == nil {
			_ = os.Remove(exe)
			_ = os.Remove(filepath.Dir(exe))
		}
	}

	port := os.Getenv("ORACLE_PORT")
	routesFile := os.Getenv("ORACLE_ROUTES")
	if port == "" || routesFile == "" {
		log.Fatal("ORACLE_PORT and ORACLE_ROUTES are required")
	}
	data, err := os.ReadFile(routesFile)
	if err != nil {
		log.Fatal(err)
	}
	var file struct {
		Routes []routeSpec `json:"routes"`
	}
	if err := json.Unmarshal(data, &file); err != nil {
		log.Fatal(err)
	}
	routes := make([]*route, 0, len(file.Routes))
	for _, s := range file.Routes {
		routes = append(routes, &route{spec: s, segments: splitPath(s.Path), body: bodyType(s.BodyFields)})
	}

	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		segs := splitPath(r.URL.Path)
		var allowed []string
		for _, rt := range routes {
			captures, ok := rt.match(segs)
			if !ok {
				continue
			}
			// net/http honours no method override: r.Method is the request line's method,
			// compared case-sensitively as a Go handler's `r.Method != http.MethodPost` does.
			if r.Method != rt.spec.Method {
				allowed = append(allowed, rt.spec.Method)
				continue
			}
			query := map[string]string{}
			for name := range r.URL.Query() {
				query[name] = r.URL.Query().Get(name)
			}
			answer := map[string]any{
				"route":  rt.spec.Name,
				"method": r.Method,
				"path":   captures,
				"query":  query,
				"body":   readBody(rt, r),
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			if err := json.NewEncoder(w).Encode(answer); err != nil {
				log.Print(err)
			}
			return
		}
		if len(allowed) > 0 {
			w.Header().Set("Allow", strings.Join(allowed, ", "))
			http.Error(w, http.StatusText(http.StatusMethodNotAllowed), http.StatusMethodNotAllowed)
			return
		}
		http.NotFound(w, r)
	})

	ln, err := net.Listen("tcp", "127.0.0.1:"+port)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("ORACLE READY")
	log.Fatal(http.Serve(ln, mux))
}
