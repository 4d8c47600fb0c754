// A class hierarchy with virtual functions and multiple inheritance, shared
// by the writer and the reader, two executables built from different sources.
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

}  // namespace geo
