// Class hierarchies with virtual functions, multiple inheritance and virtual
// bases, shared by the writer and the reader, two executables built from
// different sources.
// As in any program, the classes' key functions are defined in one source
// (shapes.cpp) linked into every program that uses them, which is where the
// compiler puts their vtables: a program that only reads Circles still has
// Circle's vtable to relink to.
#pragma once

#include <steppe/steppe.hpp>

#include <cstring>
#include <string>

namespace geo {

class Shape {
public:
    virtual ~Shape() = default;
    virtual double area() const = 0;
    virtual int corners() const = 0;
    Shape* next = nullptr;
    STEPPE_FIELDS(next)
};

class Named {
public:
    virtual ~Named() = default;
    virtual std::string name() const { return label; }
    char label[16] = {};
    STEPPE_FIELDS(label)
};

class Circle : public Shape, public Named {
public:
    explicit Circle(double r) : r_(r) { std::strcpy(label, "circle"); }
    double area() const override;  // key function: the vtable lives in shapes.cpp
    int corners() const override { return 0; }
    STEPPE_BASES(Shape, Named)
    STEPPE_FIELDS(r_)

private:
    double r_;
};

class Rect : public Shape, public Named {
public:
    Rect(double w, double h) : w_(w), h_(h) { std::strcpy(label, "rect"); }
    double area() const override;
    int corners() const override { return 4; }
    std::string name() const override { return std::string("rect ") + std::to_string(static_cast<int>(w_)); }
    STEPPE_BASES(Shape, Named)
    STEPPE_FIELDS(w_, h_)

private:
    double w_, h_;
};

struct Drawing {
    Shape* first;
    Named* labels[4];
};

// A diamond with virtual inheritance: Widget holds one Labeled, reached
// through Component and through Priced, at an offset its vtable gives.
class Labeled {
public:
    virtual ~Labeled() = default;
    virtual std::string describe() const;  // key function
    char label[16] = {};
    Labeled* owner = nullptr;
    STEPPE_FIELDS(label, owner)
};

class Component : public virtual Labeled {
public:
    virtual double mass() const = 0;
    Component* next = nullptr;
    STEPPE_BASES(Labeled)
    STEPPE_FIELDS(next)
};

class Priced : public virtual Labeled {
public:
    virtual long price() const;  // key function
    long cents = 0;
    STEPPE_BASES(Labeled)
    STEPPE_FIELDS(cents)
};

class Widget : public Component, public Priced {
public:
    Widget(const char* label, double kg, long cents);
    double mass() const override;  // key function
    long price() const override { return 2 * cents; }
    std::string describe() const override { return std::string("widget ") + label; }
    STEPPE_BASES(Component, Priced)
    STEPPE_FIELDS(kg_)

private:
    double kg_;
};

struct Assembly {
    Component* first;
    Labeled* labels[3];
    Priced* priced[3];
};

}  // namespace geo
