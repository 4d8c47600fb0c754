#include "shapes.hpp"

namespace geo {
double Circle::area() const { return 3 * r_ * r_; }
double Rect::area() const { return w_ * h_; }

std::string Labeled::describe() const { return std::string("labeled ") + label; }
long Priced::price() const { return cents; }

Widget::Widget(const char* l, double kg, long c) : kg_(kg) {
    std::strncpy(label, l, sizeof label - 1);
    cents = c;
}
double Widget::mass() const { return kg_; }
}  // namespace geo
