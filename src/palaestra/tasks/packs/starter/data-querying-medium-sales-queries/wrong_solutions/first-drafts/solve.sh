#!/usr/bin/env bash
# plausible first drafts: inner joins drop empty regions/categories, COUNT(*) after the
# item join counts items, list price instead of the item price, refunded sales count,
# MIN(date) joined back duplicates same-day first orders
set -e
mkdir -p queries && cd queries
R="i.quantity * i.unit_price_cents * (100 - COALESCE(i.discount_pct, 0)) / 100.0"
cat > q1.sql <<SQL
SELECT r.name AS region, ROUND(SUM($R) / 100.0, 2) AS revenue
FROM regions r JOIN customers c ON c.region_id = r.id
JOIN orders o ON o.customer_id = c.id AND o.status = 'paid'
JOIN order_items i ON i.order_id = o.id
GROUP BY r.id ORDER BY revenue DESC, region;
SQL
cat > q2.sql <<SQL
SELECT c.id, c.name, COUNT(*) AS orders FROM orders o JOIN customers c ON c.id = o.customer_id
WHERE o.status = 'paid' AND o.order_date LIKE '2024%' GROUP BY c.id ORDER BY orders DESC LIMIT 5;
SQL
cat > q3.sql <<SQL
SELECT substr(o.order_date, 1, 7) AS month, COUNT(*) AS orders, ROUND(SUM($R) / 100.0, 2)
FROM orders o JOIN order_items i ON i.order_id = o.id
WHERE o.status = 'paid' AND o.order_date LIKE '2024%' GROUP BY month ORDER BY month;
SQL
cat > q4.sql <<SQL
SELECT p.id, p.name FROM products p WHERE p.id NOT IN (SELECT product_id FROM order_items)
ORDER BY p.id;
SQL
cat > q5.sql <<SQL
WITH rev AS (SELECT p.category, SUM(i.quantity * p.list_price_cents) AS cents
             FROM products p JOIN order_items i ON i.product_id = p.id GROUP BY p.category)
SELECT category, ROUND(cents / 100.0, 2) AS revenue,
       ROUND(100.0 * cents / (SELECT SUM(cents) FROM rev), 1) AS share_pct
FROM rev ORDER BY revenue DESC, category;
SQL
cat > q6.sql <<SQL
WITH firsts AS (SELECT customer_id, MIN(order_date) AS d FROM orders WHERE status = 'paid'
                GROUP BY customer_id)
SELECT f.customer_id, f.d, ROUND(COALESCE(SUM($R), 0) / 100.0, 2)
FROM firsts f JOIN orders o ON o.customer_id = f.customer_id AND o.order_date = f.d
 AND o.status = 'paid'
LEFT JOIN order_items i ON i.order_id = o.id
GROUP BY f.customer_id ORDER BY f.customer_id;
SQL
