// texas_policies.hpp — Texas's granularity variants (Kakkad 1997 §3.8, §5.6;
// digest 002 §2.10, §4.5) of the page-engine policy: the same store, the same
// OO1 source (oo1.hpp), other pointer types.
//
//   steppe-uffd         all-raw: every persistent pointer a raw T*, swizzled as
//                       its page faults in (policies.hpp's steppe_policy)
//   steppe-smart-index  mixed: the index's slots hold steppe::pref<Part>,
//                       translated at each use; every other pointer raw
//   steppe-all-smart    fine: every persistent pointer a steppe::pref<T>, so the
//                       page engine swizzles nothing and reserves a page only
//                       when a pref to it is followed
//
// Both on the userfaultfd backend, like steppe-uffd.
#pragma once

#include <steppe/pref.hpp>

#include <string>

#include "policies.hpp"

namespace bench {

struct steppe_smart_index_policy : steppe_policy {
    static constexpr const char* name = "steppe-smart-index";
    template <class T>
    using index_ptr = steppe::pref<T>;
    using steppe_policy::get;
    template <class T>
    static T* get(const steppe::pref<T>& p) {
        return p.get();
    }
    using steppe_policy::steppe_policy;
    std::string describe() const {
        return steppe_policy::describe() + "; the index's pointers are steppe::pref (translated at each use)";
    }
};

struct steppe_all_smart_policy : steppe_policy {
    static constexpr const char* name = "steppe-all-smart";
    template <class T>
    using ptr = steppe::pref<T>;
    template <class T>
    static T* get(const steppe::pref<T>& p) {
        return p.get();
    }
    using steppe_policy::steppe_policy;
    template <class T>
    ptr<T> make() {
        return steppe_policy::make<T>();
    }
    template <class T>
    ptr<T> make_array(std::size_t n) {
        return steppe_policy::make_array<T>(n);
    }
    template <class T>
    void destroy(const ptr<T>& p, std::size_t n) {
        steppe_policy::destroy(p.get(), n);
    }
    std::string describe() const {
        return steppe_policy::describe() + "; every persistent pointer is steppe::pref (translated at each use)";
    }
};

// f(model, info) for the two systems above; false for any other system.
template <template <class> class Model, class F>
bool with_texas_model(const std::string& sys, const std::string& path, bool create, F&& f) {
    if (sys == steppe_smart_index_policy::name)
        with_steppe_model<Model, steppe_smart_index_policy>(path, steppe::fault_backend::uffd, create, f);
    else if (sys == steppe_all_smart_policy::name)
        with_steppe_model<Model, steppe_all_smart_policy>(path, steppe::fault_backend::uffd, create, f);
    else
        return false;
    return true;
}

}  // namespace bench
